"""mrcnic host side: wire format, ICRC, EV mapping, register map and client, scapy layers, CLI."""

"""The boards' management addresses unless a build says others: the simulated boards' too (the
tests drive a board NIC at them), so a bitstream answers where the tests found it."""

__all__ = ["BOARD_ADDRESSES", "BOARD_B_ADDRESSES", "BOARD_C_ADDRESSES"]

#: The simulated board's, and the Versa's.
BOARD_ADDRESSES = {"mac": 0x02_4D_52_43_00_01, "ipv4": 0xC0A8_0702,   # 192.168.7.2
                   "ipv6": 0xFD00_0007 << 96 | 2}                      # fd00:7::2
#: The simulated second board's, and the Colorlight's: the two boards can share a network.
BOARD_B_ADDRESSES = {"mac": 0x02_4D_52_43_00_02, "ipv4": 0xC0A8_0703,
                     "ipv6": 0xFD00_0007 << 96 | 3}
#: The ECPIX-5's, beside the other two on the same network.
BOARD_C_ADDRESSES = {"mac": 0x02_4D_52_43_00_03, "ipv4": 0xC0A8_0704,
                     "ipv6": 0xFD00_0007 << 96 | 4}

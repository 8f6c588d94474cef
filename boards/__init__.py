"""Board top-levels (MAC, management port, clocks) and the bitstream build with open tools."""

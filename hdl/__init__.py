"""mrcnic gateware: Amaranth components, one a file, each named for what it does."""

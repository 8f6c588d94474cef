"""mrcnic verification: the cocotb + Verilator harness, testbenches, reference models, demo."""

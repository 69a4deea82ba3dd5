"""Converting the families beside EAGLE-3 on the command line: the forms both ways, and bad input refused in one
line (a block size of 0, a mask token out of range, a DFlash lm_head of the wrong vocabulary, a form that would
lose the family)."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean_failure, run_inprocess
from support import families as F


def test_dflash_to_speculators_and_back(tmp_path):
    src = F.zlab_dflash(tmp_path / "native")
    r = run_inprocess("convert", src, tmp_path / "spec", "--to", "speculators", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["plan"]["dialect"] == "dflash"
    r = run_inprocess("convert", tmp_path / "spec", tmp_path / "back", "--to", "native")
    assert r.code == 0, r.err
    assert (tmp_path / "back" / "config.json").read_text() == (src / "config.json").read_text()


def test_block_size_zero_is_one_line(tmp_path):
    src = F.zlab_dflash(tmp_path / "native", block_size=0)
    out = tmp_path / "out"
    assert_clean_failure(run_inprocess("convert", src, out, "--to", "speculators"), out, contains="block_size")


def test_mask_token_of_the_wrong_type_is_one_line(tmp_path):
    src = F.zlab_dflash(tmp_path / "native", mask_token_id=-1)
    out = tmp_path / "out"
    assert_clean_failure(run_inprocess("convert", src, out, "--to", "speculators"), out, contains="mask_token_id")


def test_lm_head_of_the_wrong_vocabulary_is_refused(tmp_path):
    src = F.zlab_dflash(tmp_path / "native", lm_head_rows=F.VOCAB // 2)
    out = tmp_path / "out"
    assert_clean_failure(run_inprocess("convert", src, out, "--to", "speculators"), out, contains="lm_head")


def test_a_block_drafter_has_no_eagle31_form(tmp_path):
    src = F.deepspec_dspark(tmp_path / "native")
    out = tmp_path / "out"
    assert_clean_failure(run_inprocess("convert", src, out, "--to", "eagle31"), out, contains="no EAGLE 3.1 form")


def lender(folder, spec, tied: bool = False):
    """A target with the tensors a block drafter borrows (embedding, final norm, lm_head unless tied)."""
    import torch
    from safetensors.torch import save_file

    F.target(folder)
    g = torch.Generator().manual_seed(7)
    tensors = {
        "model.embed_tokens.weight": torch.randn(spec.vocab_size, spec.target_hidden_size, generator=g),
        "model.norm.weight": torch.rand(spec.target_hidden_size, generator=g),
    }
    if not tied:
        tensors["lm_head.weight"] = torch.randn(spec.vocab_size, spec.target_hidden_size, generator=g)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return tensors


@pytest.mark.parametrize("tied", [False, True])
def test_borrowed_tensors_filled_from_the_target_only_when_asked(tmp_path, tied):
    from safetensors.torch import load_file

    from eaglezoo.checkpoint.read import read_drafter

    src = F.zlab_dflash(tmp_path / "native")
    lent = lender(tmp_path / "target", read_drafter(src, strict=False).spec, tied)
    r = run_inprocess("convert", src, tmp_path / "plain", "--to", "speculators", "--target", tmp_path / "target")
    assert r.code == 0, r.err
    assert not {"embed_tokens.weight", "lm_head.weight"} & load_file(tmp_path / "plain" / "model.safetensors").keys()
    r = run_inprocess(
        "convert",
        src,
        tmp_path / "filled",
        "--to",
        "speculators",
        "--target",
        tmp_path / "target",
        "--borrow-from-target",
        "--json",
    )
    assert r.code == 0, r.err
    out = load_file(tmp_path / "filled" / "model.safetensors")
    assert out["embed_tokens.weight"].equal(lent["model.embed_tokens.weight"])
    assert out["lm_head.weight"].equal(lent["model.embed_tokens.weight" if tied else "lm_head.weight"])
    assert out["verifier_norm.weight"].equal(lent["model.norm.weight"])
    decisions = json.loads((tmp_path / "filled" / "conversion.json").read_text())["decisions"]
    assert sum("borrowed from the target" in d for d in decisions) == 3
    plain = load_file(tmp_path / "plain" / "model.safetensors")
    assert all(out[n].equal(t) for n, t in plain.items())  # the drafter's own tensors untouched
    r = run_inprocess(
        "convert", tmp_path / "filled", tmp_path / "back", "--to", "speculators"
    )  # read back as speculators
    assert r.code == 0, r.err


def test_borrowing_refuses_what_it_cannot_do(tmp_path):
    from eaglezoo.checkpoint.read import read_drafter

    src = F.zlab_dflash(tmp_path / "native")
    spec = read_drafter(src, strict=False).spec
    lender(tmp_path / "target", spec)
    out = tmp_path / "out"
    assert_clean_failure(
        run_inprocess("convert", src, out, "--to", "speculators", "--borrow-from-target"),
        out,
        contains="needs the target",
    )
    assert_clean_failure(
        run_inprocess("convert", src, out, "--to", "native", "--target", tmp_path / "target", "--borrow-from-target"),
        out,
        contains="only the speculators form",
    )
    peagle = F.peagle_native(tmp_path / "peagle")
    assert_clean_failure(
        run_inprocess(
            "convert", peagle, out, "--to", "speculators", "--target", tmp_path / "target", "--borrow-from-target"
        ),
        out,
        contains="this is a peagle drafter",
    )
    small = tmp_path / "small"
    F.target(small)
    import torch
    from safetensors.torch import save_file

    save_file(
        {
            "model.embed_tokens.weight": torch.zeros(spec.vocab_size // 2, spec.target_hidden_size),
            "model.norm.weight": torch.ones(spec.target_hidden_size),
        },
        small / "model.safetensors",
    )
    assert_clean_failure(
        run_inprocess("convert", src, out, "--to", "speculators", "--target", small, "--borrow-from-target"),
        out,
        contains="the drafter needs",
    )


@pytest.mark.parametrize(
    "make,ids,to",
    [
        (F.zlab_dflash, {"target_layer_ids": (-3, 2)}, "speculators"),
        (F.deepspec_dspark, {"target_layer_ids": (0, -1, 2)}, "speculators"),
    ],
    ids=["dflash", "dspark"],
)
def test_negative_aux_ids_are_refused_not_written(tmp_path, make, ids, to):
    """A negative id is no target layer (Python would index from the end): refused where the config is read."""
    src = make(tmp_path / "native", **ids)
    out = tmp_path / "out"
    assert_clean_failure(run_inprocess("convert", src, out, "--to", to), out, contains="target_layer_ids")
    spec = tmp_path / "spec"  # the speculators form's key, read the same way
    assert run_inprocess("convert", F.zlab_dflash(tmp_path / "ok"), spec, "--to", "speculators").code == 0
    cfg = json.loads((spec / "config.json").read_text())
    cfg["aux_hidden_state_layer_ids"] = [-1, 3]
    (spec / "config.json").write_text(json.dumps(cfg))
    assert_clean_failure(
        run_inprocess("convert", spec, out, "--to", "native"), out, contains="aux_hidden_state_layer_ids"
    )


@pytest.mark.parametrize("dtype", ["complex64", "int64", "int8", "bool"])
@pytest.mark.parametrize("lent", ["model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"])
def test_borrowing_refuses_a_target_tensor_of_a_dtype_no_drafter_computes_in(tmp_path, dtype, lent):
    import torch
    from safetensors.torch import save_file

    from eaglezoo.checkpoint.read import read_drafter

    src = F.zlab_dflash(tmp_path / "native")
    tensors = lender(tmp_path / "target", read_drafter(src, strict=False).spec)
    tensors[lent] = tensors[lent].to(getattr(torch, dtype))
    save_file(tensors, tmp_path / "target" / "model.safetensors", metadata={"format": "pt"})
    out = tmp_path / "out"
    r = run_inprocess(
        "convert", src, out, "--to", "speculators", "--target", tmp_path / "target", "--borrow-from-target"
    )
    assert_clean_failure(r, out, contains=f"{lent} is {dtype}")


def test_negative_aux_ids_given_on_the_command_line_are_refused(tmp_path):
    from conftest import EXAMPLE

    out = tmp_path / "out"
    r = run_inprocess(
        "convert",
        EXAMPLE / "eagle3-safeai",
        out,
        "--to",
        "speculators",
        "--aux-layers=-1,2,3",
        "--aux-convention",
        "boundary",
    )
    assert_clean_failure(r, out, contains="--aux-layers holds a negative layer id")

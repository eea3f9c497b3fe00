"""``headwise train``: train, calibrate and save an intent classifier."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwise.commands._common import (
    add_data_options,
    check_out_dir,
    parse_assignment,
    plural,
    read,
    read_compound,
    report_trained,
)

if TYPE_CHECKING:
    from headwise.intent.training.recipe import IntentRecipe

#: the recipe fields ``headwise train`` has an option for; the rule: ``PART.FIELD`` is
#: ``--FIELD`` (underscores as dashes), its help and type from the part. Every other field
#: is reached with ``--set PART.FIELD=VALUE`` or ``--config``.
EXPOSED = ("train.epochs", "train.lr", "train.seed", "train.precision", "decision.oos_labels")


def option_of(path: str) -> str:
    """The ``headwise train`` option of an exposed recipe path (``train.lr`` -> ``--lr``)."""
    return "--" + path.rsplit(".", 1)[1].replace("_", "-")


def _exposed_options(paths: tuple[str, ...] = EXPOSED) -> list[tuple[str, str, Any, str]]:
    """``(path, option, type, help)`` of every field in ``paths`` (default :data:`EXPOSED`),
    read from the part's dataclass (its annotation and the first sentence of its docstring
    entry)."""
    import dataclasses
    import typing

    from headwise.intent.training.recipe import PARTS
    from headwise.intent.training.recipe.reference import field_docs, first_sentence

    out = []
    for path in paths:
        part, name = path.split(".")
        cls_ = next(c for c in PARTS[part] if name in {f.name for f in dataclasses.fields(c)})
        hint = typing.get_type_hints(cls_)[name]
        base = next((t for t in (bool, int, float, str)
                     if t is hint or t in typing.get_args(hint)), str)
        doc = re.sub(r":\w+:`~?([^`]+)`", lambda m: m.group(1).rsplit(".", 1)[-1],
                     first_sentence(field_docs(cls_).get(name, "")))
        text = f"{path}: {doc}".replace("``", "").replace("%", "%%")
        out.append((path, option_of(path), base, text))
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train an intent classifier",
        description="Train an intent classifier (single-label, or several intents + slots) "
        "on labelled data, calibrate it on validation data, and save it. The recipe: "
        "--config FILE (docs/recipe.md), then the options.")
    p.add_argument("--data", required=True, help="training data file")
    p.add_argument("--valid", help="validation data file (default: 10%% of --data, stratified)")
    p.add_argument("--no-valid", action="store_true",
                   help="train on all of --data, no validation (recipe valid_fraction 0)")
    p.add_argument("--model",
                   help="transformer, bilstm, tfidf or pretrained:NAME_OR_DIR (the recipe's "
                   "architecture; default: --config's, else the strongest installed "
                   "pretrained encoder, else transformer)")
    p.add_argument("--multi-label", action="store_true",
                   help="several intents per text and slots (task multi_label; detected when "
                   "the data rows carry an 'intents' list)")
    p.add_argument("--config", help="JSON file of the recipe, by part")
    p.add_argument("--set", action="append", metavar="PART.FIELD=VALUE",
                   help="set any recipe field, VALUE as JSON or a string (e.g. --set "
                   "architecture.d_model=128); repeatable")
    p.add_argument("--out", required=True, help="directory to save the classifier in")
    add_field_options(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars (train.progress)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from its last checkpoint in --out")
    p.add_argument("--overwrite", action="store_true",
                   help="replace what --out holds, swapped in only once the new model is "
                   "saved")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep the training checkpoints (OUT/checkpoints)")
    p.add_argument("--init-from", metavar="MODEL",
                   help="warm start from this saved model, new intents growing its head "
                   "(docs/intent.md, Warm start)")
    p.add_argument("--replay", type=float, metavar="SHARE",
                   help="with --init-from: share of the old intents' rows kept (default 1)")
    add_data_options(p)
    p.epilog = ("An option or field that the chosen architecture or task does not have is "
                "refused with a message naming it, never ignored.")
    p.set_defaults(func=run)


def add_field_options(p: argparse.ArgumentParser, paths: tuple[str, ...] = EXPOSED) -> None:
    """An option for each recipe field in ``paths`` by the one rule (:func:`option_of`;
    a bool field is ``--FIELD``/``--no-FIELD``), its value kept under the path."""
    for path, option, base, text in _exposed_options(paths):
        if base is bool:
            p.add_argument(option, dest=path, action=argparse.BooleanOptionalAction,
                           default=None, help=text)
        else:
            p.add_argument(option, dest=path, type=base, help=text,
                           metavar=path.rsplit(".", 1)[1].upper())


def apply_field_options(args: argparse.Namespace, data: dict[str, Any],
                        paths: tuple[str, ...] = EXPOSED) -> None:
    """Set in recipe ``data`` (by part) each field of ``paths`` whose option was given."""
    for path in paths:
        value = getattr(args, path)
        if value is not None:
            set_path(data, path, value)


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set ``PART.FIELD`` (or ``PART.FIELD.KEY`` of an object field) in recipe ``data``
    (by part, as a ``--config`` file holds it).

    Raises:
        ValueError: a path without a part and a field, or through a value that is not an
            object.
    """
    keys = path.split(".")
    if len(keys) < 2 and path != "valid_fraction":
        raise ValueError(f"--set {path}: name a part and a field (e.g. train.lr)")
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ValueError(f"--set {path}: {key} is not an object")
    node[keys[-1]] = value


def recipe_data(args: argparse.Namespace) -> dict[str, Any]:
    """The recipe the command line gives, by part: ``--config``, then the options and
    ``--set`` (which win), ``--model`` as the architecture's type (and name)."""
    from headwise.intent.training.recipe import IntentRecipe, architecture_from_spec

    data = IntentRecipe.read_config(args.config) if args.config else {}
    apply_field_options(args, data)
    if args.quiet:
        set_path(data, "train.progress", False)
    if args.no_valid:
        if args.valid:
            raise ValueError("--no-valid and --valid exclude each other")
        data["valid_fraction"] = 0.0
    for item in args.set or []:
        set_path(data, *parse_assignment(item))
    if args.model:
        part = architecture_from_spec(args.model)
        set_path(data, "architecture.type", part.NAME)
        if part.NAME == "pretrained":
            set_path(data, "architecture.name", part.name)
    if args.multi_label:
        set_path(data, "task.type", "multi_label")
    return data


def run(args: argparse.Namespace) -> int:
    target = check_out_dir(args.out)
    work = prepare_out_dir(target, resume=args.resume, overwrite=args.overwrite)
    try:
        code = _train(args, work)
    except BaseException:
        if work != target:  # a failed --overwrite run: the old model stays, untouched
            import shutil

            shutil.rmtree(work, ignore_errors=True)
        raise
    if work != target:
        swap_into(work, target)
    print(f"saved to {target}")
    return code


def prepare_out_dir(out: Path, *, resume: bool, overwrite: bool) -> Path:
    """The directory a run writes into: ``out`` itself when it is missing or empty (or the
    run resumes in it), a fresh staging folder beside it when it holds files and
    ``overwrite`` is set (see :func:`swap_into`).

    Raises:
        ValueError: ``out`` holds files and neither ``resume`` nor ``overwrite`` is set; both
            are set.
    """
    if resume and overwrite:
        raise ValueError("--resume continues the run in --out and --overwrite replaces it; "
                         "give one of them")
    held = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if resume:
        from headwise.train import find_latest_checkpoint

        if find_latest_checkpoint(out / "checkpoints") is None:
            print(f"--resume: no checkpoint in {out / 'checkpoints'} yet; training from the "
                  f"start")
        return out
    if not held:
        return out
    if not overwrite:
        shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
        raise ValueError(f"--out {out} already holds files ({shown}); pass --overwrite to "
                         f"replace them, --resume to continue an interrupted run there, or "
                         f"name another directory")
    staging = out.parent / f".{out.name}.headwise-new"
    if staging.exists():  # left by an interrupted --overwrite run
        import shutil

        shutil.rmtree(staging)
    return staging


def swap_into(staging: Path, out: Path) -> None:
    """Replace ``out`` by the freshly written ``staging`` folder: ``out`` is moved aside,
    ``staging`` renamed into its place (both on one file system: two atomic renames), then
    the old contents are removed. Whatever fails before, ``out`` still holds the old model.
    """
    import shutil

    old = out.parent / f".{out.name}.headwise-old"
    if old.exists():
        shutil.rmtree(old)
    out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def _train(args: argparse.Namespace, out: Path) -> int:
    """Train as the arguments say, writing the classifier into ``out``."""
    # imported here, not at start: `headwise --help` stays light
    from headwise.intent.training.builders import default_blend, default_model
    from headwise.intent.training.pipeline import train_intent_classifier
    from headwise.intent.training.recipe import IntentRecipe
    from headwise.text.annotations import looks_multi_label
    from headwise.text.readers import unseen_labels

    data = recipe_data(args)
    start = _warm_start(args)
    if start is not None:
        from headwise.intent.training.warm_start import warm_recipe

        named = "epochs" in (data.get("train") or {})
        data = warm_recipe(start.parent, data)
        if not named and (data.get("architecture") or {}).get("type") != "tfidf":
            print(f"warm start: {data['train']['epochs']} epochs, a third of the parent's "
                  f"(--epochs to choose)")
    task = data.get("task") if isinstance(data.get("task"), dict) else {}
    multi_label = task.get("type") == "multi_label" or looks_multi_label(args.data)
    if multi_label:
        set_path(data, "task.type", "multi_label")
    arch = data.get("architecture") if isinstance(data.get("architecture"), dict) else {}
    recipe = IntentRecipe.from_dict(data) if "type" in arch else None  # known: check early
    if multi_label:
        if recipe is None:
            recipe = IntentRecipe.from_dict(data)
        return _run_compound(args, recipe, out, start)
    train = read(args.data, args)
    valid = read(args.valid, args) if args.valid else None
    print(f"training data: {plural(len(train), 'row')}, "
          f"{plural(len(_intents(train.intent_names(), data)), 'intent')} ({args.data})")
    if recipe is None:
        model, reason = default_model([ex.text for ex in train])
        set_path(data, "architecture.type", model.partition(":")[0])
        if model.startswith("pretrained:"):
            set_path(data, "architecture.name", model.partition(":")[2])
        if default_blend(data, valid is not None):
            set_path(data, "levers.blend", "tfidf")
            reason += ("; a TF-IDF model is fitted beside it and blended in when the "
                       "validation data shows a significant gain (--set levers.blend=none: "
                       "the network alone)")
        print(reason)
        recipe = IntentRecipe.from_dict(data)
    if valid is not None:
        new = unseen_labels(train, valid)
        print(f"validation data: {plural(len(valid), 'row')} ({args.valid})")
        if new:
            print("  intents only in the validation data (out-of-scope rows are used for the "
                  "threshold, others are left out): "
                  + ", ".join(f"{k} ({v})" for k, v in new.items()))
    result = train_intent_classifier(train, valid, recipe, out_dir=out, resume=args.resume,
                                     keep_checkpoints=args.keep_checkpoints, report=print,
                                     init_from=start)
    print(f"trained {recipe.architecture.spec} in {result.train_seconds:.1f} s")
    info = result.classifier.info
    if info.get("selection"):
        sel = info["selection"]
        print(f"chosen by {sel['by']}: C {sel['c']:g}"
              + ("" if sel["tau"] is None else f", prior correction tau {sel['tau']:g}"))
    elif info.get("prior_correction"):
        print(f"prior correction tau {info['prior_correction']['tau']:g}")
    report_trained(result, out)
    return 0


def _warm_start(args: argparse.Namespace) -> Any:
    """The :class:`~headwise.intent.training.warm_start.WarmStart` of ``--init-from`` and
    ``--replay`` (the data files ``--data`` and ``--valid`` for the lineage), None without.

    Raises:
        ValueError: ``--replay`` without ``--init-from``.
    """
    if args.init_from is None:
        if args.replay is not None:
            raise ValueError("--replay is the share of a parent's rows a warm start keeps: "
                             "give --init-from MODEL too")
        return None
    from headwise.intent.training.warm_start import WarmStart

    files = tuple(Path(f) for f in (args.data, args.valid) if f)
    return WarmStart(Path(args.init_from), 1.0 if args.replay is None else args.replay, files)


def _intents(labels: list[str], data: dict[str, Any]) -> list[str]:
    """The labels that are intents: not out-of-scope (``oos`` ..., or the recipe
    ``data``'s ``decision.oos_labels``)."""
    from headwise.text.labels import is_oos_label

    decision = data.get("decision") if isinstance(data.get("decision"), dict) else {}
    extra = decision.get("oos_labels") or []
    extra = [extra] if isinstance(extra, str) else [str(x) for x in extra]
    return [y for y in labels if not is_oos_label(y, extra)]


def _run_compound(args: argparse.Namespace, recipe: IntentRecipe, out: Path,
                  start: Any = None) -> int:
    from headwise.intent.training.pipeline import train_intent_classifier

    given = [o for o, on in (("--format", args.format != "auto"),
                             ("--columns", args.columns != (None, None))) if on]
    if given:
        raise ValueError(f"{given[0]} is single-label data's: multi-label data is JSON lines "
                         f"of annotated examples (text, intents, slots)")
    train = read_compound(args.data, args)
    valid = read_compound(args.valid, args) if args.valid else None
    print(f"training data (multi-label): {plural(len(train), 'text')}, "
          f"{plural(len(train.intent_names()), 'intent')}, "
          f"{plural(len(train.slot_names()), 'slot name')} ({args.data})")
    result = train_intent_classifier(train, valid, recipe, out_dir=out, resume=args.resume,
                                     keep_checkpoints=args.keep_checkpoints, init_from=start)
    lineage = result.classifier.info.get("lineage")
    if lineage:
        added = lineage["intents_added"]
        print(f"warm start from {lineage['parent']}: "
              + (f"{len(added)} new intents ({', '.join(added[:5])})" if added
                 else "the same intents"))
    m = result.valid_metrics
    print(f"trained {recipe.architecture.spec} (intents + slots) in "
          f"{result.train_seconds:.1f} s")
    blend = result.classifier.info.get("blend")
    if blend:
        from dataclasses import fields

        from headwise.intent.training.blending import BlendChoice

        print(BlendChoice(**{f.name: blend[f.name] for f in fields(BlendChoice)}).describe())
    if m:
        print(f"validation: intent micro-F1 {m['micro_f1']:.4f}, macro-F1 {m['macro_f1']:.4f}, "
              f"exact match {m['exact_match']:.4f}; {result.threshold.describe()}")
    (out / "train_summary.json").write_text(
        json.dumps(result.classifier.info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0

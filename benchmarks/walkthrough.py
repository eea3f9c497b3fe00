"""The README's first hour, run as written: the demo, then the commands of *Intent recognition
in four commands* (train, eval, predict, serve and a request to it), each checked.

    python benchmarks/walkthrough.py              # in a scratch folder, with this checkout's .venv
    python benchmarks/walkthrough.py --fresh      # a fresh `git clone` of HEAD, set up by its ./run
    python benchmarks/walkthrough.py --keep DIR   # leave the scratch folder at DIR

The script reads the README's fenced ``bash`` blocks under that heading, joins the
lines continued with ``\\``, and runs each command with bash in the scratch folder, after
``./run demo --quick`` has written ``headwise-demo/`` there (the README's demo command, in
its quick form so the walkthrough takes minutes; ``--full-demo`` runs the whole one). A
command that ends with ``&`` (the server) is started in the background and the next one
waits until its ``/readyz`` answers 200. Every command must exit 0, and its output must
have the shape the README promises:

* ``headwise predict ... --json``: one JSON object per line with ``intents``,
  ``out_of_scope``, ``slots``, ``top_k`` and ``decision``;
* ``headwise predict`` (text): a line per text; ``--data FILE --out OUT``: ``OUT`` written;
* ``headwise eval``: accuracy and macro-F1;
* ``headwise train``: the model directory it names exists afterwards;
* ``curl .../v1/predict``: JSON with one prediction per text sent.

Exit status 0 when every step passed; the table of steps (command, seconds, verdict) is
printed either way, and, unless ``--no-write``, stored (with its provenance) in
``benchmarks/results/walkthrough.json`` and written as the ``walkthrough`` section of its
page (``docs/benchmarks/serving.md``, beside ``--md``). Nothing here is timed for a
benchmark: the seconds say where the hour goes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

SECTION = "walkthrough"
RESULTS = HERE / "results" / "walkthrough.json"
#: the README sections whose bash blocks the walkthrough runs, in order
SECTIONS = ("Intent recognition in four commands",)


@dataclass
class Step:
    """One command of the walkthrough and what became of it."""

    command: str
    seconds: float = 0.0
    ok: bool = False
    why: str = ""
    output: str = field(default="", repr=False)


def readme_commands(readme: Path, sections: tuple[str, ...] = SECTIONS) -> list[str]:
    """The commands of the fenced ``bash`` blocks under the given headings, in file order:
    comments stripped, ``\\`` continuations joined, blank lines dropped.

    Raises:
        ValueError: a heading that is missing or has no bash block.
    """
    text = readme.read_text(encoding="utf-8")
    out: list[str] = []
    for title in sections:
        m = re.search(rf"^#+ {re.escape(title)}.*?$(.*?)(?=^#+ |\Z)", text, re.M | re.S)
        if not m:
            raise ValueError(f"README has no section {title!r}")
        blocks = re.findall(r"^```bash\n(.*?)^```", m.group(1), re.M | re.S)
        if not blocks:
            raise ValueError(f"README section {title!r} has no bash block")
        for block in blocks:
            joined = re.sub(r"[ \t]*\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = _strip_comment(line).strip()
                if line:
                    out.append(line)
    return out


def _strip_comment(line: str) -> str:
    """``line`` without a trailing ``# ...`` comment (a ``#`` inside quotes is kept)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def check_output(command: str, output: str, workdir: Path) -> str:
    """Why the output of ``command`` breaks the README's promise, or ``""``."""
    words = shlex.split(command.split("|")[-1]) if "|" in command else shlex.split(command)
    if words[:1] == ["curl"]:
        try:
            body = json.loads(output)
        except json.JSONDecodeError:
            return f"not JSON: {output[:200]!r}"
        sent = json.loads(words[words.index("-d") + 1]) if "-d" in words else {}
        want = len(sent.get("texts", [])) or 1
        got = body.get("predictions", [])
        return "" if len(got) == want and all("intents" in p for p in got) else \
            f"{len(got)} predictions for {want} texts"
    if words[:2] == ["headwise", "predict"] and "--data" in words and "--out" in words:
        out = workdir / words[words.index("--out") + 1]  # a file streamed to a file
        return "" if out.is_file() and out.stat().st_size else f"{out} was not written"
    if words[:2] == ["headwise", "predict"]:
        lines = [x for x in output.splitlines() if x.strip()]
        if "--json" in words:
            for x in lines:
                try:
                    rec = json.loads(x)
                except json.JSONDecodeError:
                    return f"not a JSON line: {x[:120]!r}"
                missing = {"intents", "out_of_scope", "slots", "top_k", "decision"} - set(rec)
                if missing:
                    return f"a record lacks {sorted(missing)}"
            return "" if lines else "no output"
        texts = [w for w in words[3:] if not w.startswith("-")]
        return "" if len(lines) >= len(texts) else f"{len(lines)} lines for {len(texts)} texts"
    if words[:2] == ["headwise", "eval"]:
        low = output.lower()
        return "" if "accuracy" in low and "macro" in low else "no accuracy / macro-F1 printed"
    if words[:2] == ["headwise", "train"] and "--out" in words:
        out = workdir / words[words.index("--out") + 1]
        return "" if out.is_dir() else f"{out} was not written"
    return ""


def wait_ready(port: int, timeout: float = 120.0) -> bool:
    """Whether ``localhost:port/readyz`` answered 200 within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def prepare(workdir: Path, fresh: bool) -> None:
    """A scratch folder holding the project: a fresh clone of HEAD (which ``./run`` sets up
    itself), or a copy of the working tree that uses this checkout's ``.venv``."""
    if fresh:
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(workdir)], check=True)
        return
    shutil.copytree(ROOT, workdir, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "headwise-demo", "runs", "__pycache__", "*.egg-info", "results"))
    (workdir / ".venv").symlink_to(ROOT / ".venv")


def run_steps(workdir: Path, commands: list[str], demo: str) -> list[Step]:
    """Run the demo, then every command, in ``workdir``; a background server is stopped at
    the end."""
    env = {**os.environ, "PATH": f"{workdir / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PYTHONUNBUFFERED": "1"}
    steps, servers, port = [], [], None
    for command in [demo, *commands]:
        step = Step(command)
        start = time.perf_counter()
        if command.endswith("&"):
            proc = subprocess.Popen(["bash", "-c", command[:-1]], cwd=workdir, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    start_new_session=True)
            servers.append(proc)
            m = re.search(r"--port\s+(\d+)", command)
            port = int(m.group(1)) if m else 8000
            step.ok = wait_ready(port)
            step.why = "" if step.ok else f"no 200 from :{port}/readyz"
        else:
            done = subprocess.run(["bash", "-c", command], cwd=workdir, env=env,
                                  capture_output=True, text=True, timeout=3600)
            step.output = done.stdout
            if done.returncode != 0:
                step.why = f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
            else:
                step.why = check_output(command, done.stdout, workdir)
            step.ok = not step.why
        step.seconds = time.perf_counter() - start
        steps.append(step)
        print(f"{'ok ' if step.ok else 'FAIL'} {step.seconds:7.1f} s  {command}"
              + (f"\n      {step.why}" if step.why else ""), flush=True)
        if not step.ok and command == demo:
            break
    for proc in servers:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return steps


def section(data: dict) -> str:
    """The ``walkthrough`` section of a results file, the machine line under its heading."""
    where = ("a fresh `git clone` of HEAD set up by its own `./run`" if data["fresh"] else
             "a scratch copy of the working tree with this checkout's `.venv`")
    rows = [[f"`{s['command']}`".replace("|", "\\|") + (" (until `/readyz` is 200)"
                                                        if s["command"].endswith("&") else ""),
             f"{s['seconds']:.1f}", "ok" if s["ok"] else f"FAIL: {s['why']}".replace("|", "/")]
            for s in data["steps"]]
    passed, ran = sum(s["ok"] for s in data["steps"]), len(data["steps"])
    return H.with_machine_line("\n".join([
        "## The README's first hour, run as written", "",
        f"`{data['command']}` ({data['date']}; {where}). Each command of "
        f"{' and '.join(f'*{x}*' for x in SECTIONS)}, after `{data['demo']}`, must exit 0 and "
        f"print what the README promises.", "",
        H.markdown_table(["step", "seconds", "verdict"], rows, "lrl"), "",
        f"{passed} of {data['planned']} steps passed"
        + (f"; {data['planned'] - ran} not run after the demo failed"
           if ran < data["planned"] else "") + "."]), [data])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fresh", action="store_true",
                   help="a fresh git clone of HEAD, set up by its own ./run (needs the registry)")
    p.add_argument("--full-demo", action="store_true", help="./run demo instead of --quick")
    p.add_argument("--keep", type=Path, help="work in this folder and leave it")
    p.add_argument("--md", type=Path, default=ROOT / "BENCHMARKS.md",
                   help="the summary markdown file; the section goes into its page under "
                        "docs/benchmarks/ beside it")
    p.add_argument("--no-write", action="store_true",
                   help=f"leave {RESULTS.name} and the markdown alone")
    args = p.parse_args(argv)
    data = {"command": H.command_line(), "fresh": args.fresh,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "provenance": H.collect_provenance()}
    commands = readme_commands(ROOT / "README.md")
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="headwise-walkthrough-")) / "headwise"
    if workdir.exists():
        shutil.rmtree(workdir)
    prepare(workdir, args.fresh)
    demo = "./run demo" if args.full_demo else "./run demo --quick"
    try:
        steps = run_steps(workdir, commands, demo)
    finally:
        if args.keep is None:
            shutil.rmtree(workdir.parent, ignore_errors=True)
    failed = [s for s in steps if not s.ok]
    ran = len(steps)
    data.update(demo=demo, planned=len(commands) + 1, provenance=H.finish_provenance(
        data["provenance"]), steps=[{"command": s.command, "seconds": s.seconds, "ok": s.ok,
                                     "why": s.why} for s in steps])
    if not args.no_write:
        RESULTS.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n",
                           encoding="utf-8")
        H.write_section(args.md, SECTION, section(data))
    print(f"\n{ran - len(failed)} of {len(commands) + 1} steps passed"
          + (f"; {len(commands) + 1 - ran} not run after the demo failed"
             if ran < len(commands) + 1 else ""))
    return 1 if failed or ran < len(commands) + 1 else 0


if __name__ == "__main__":
    sys.exit(main())

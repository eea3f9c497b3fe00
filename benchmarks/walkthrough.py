"""The README's first hour and the walkthrough of docs/walkthrough.md, run as written: the
demo, the commands of the README's *Intent recognition in four commands* (train, eval,
predict, serve and a request to it), then every command of ``docs/walkthrough.md`` (a
team's own chat logs, GBK-encoded, to a served model), then four checked queries that a
user would try on the README's model, each checked.

    python benchmarks/walkthrough.py              # in a scratch folder, with this checkout's .venv
    python benchmarks/walkthrough.py --fresh      # a fresh `git clone` of HEAD, set up by its ./run
    python benchmarks/walkthrough.py --keep DIR   # leave the scratch folder at DIR
    python benchmarks/walkthrough.py --chat-logs headwise-demo/data   # only write the chat logs

The script reads the fenced ``bash`` blocks of the README under that heading and of the
whole of ``docs/walkthrough.md``, joins the lines continued with ``\\``, and runs each
command with bash in the scratch folder, after ``./run demo --quick`` has written
``headwise-demo/`` there (the README's demo command, in its quick form so the walkthrough
takes minutes; ``--full-demo`` runs the whole one). A command that ends with ``&`` (a
server) is started in the background and the next one waits until its ``/readyz`` answers
200; the servers of one part are stopped before the next part starts.

``docs/walkthrough.md`` works on the files a team has (``logs.csv``, ``test.csv``,
``new_logs.csv``, ``logs_v2.csv``, ``test_v2.csv``): before its commands, the step
``python benchmarks/walkthrough.py --chat-logs headwise-demo/data`` writes them, GBK-encoded
with the columns ``会话ID,客户消息,意图``, from the demo's corpus (:func:`write_chat_logs`).

Every command must exit 0, and its output must have the shape the README promises
(:func:`check_output`):

* ``headwise predict ... --json``: one JSON object per line with ``intents``,
  ``out_of_scope``, ``slots``, ``top_k`` and ``decision``;
* ``headwise predict`` (text): a line per text; ``--data FILE --out OUT``: one answer in
  ``OUT`` per row of ``FILE``, in order, each carrying the ``--columns TEXT,KEEP...``
  columns with the input's values;
* ``headwise eval``: accuracy and macro-F1;
* ``headwise train``: the model directory it names exists afterwards;
* ``curl .../v1/predict``: JSON with one prediction per text sent.

The four checks (:data:`CHECKS`, texts written by hand, none from the demo's templates)
assert what a user would check of an answer: a long message names the request inside its
chatter and says what was done with the length; a negated request is not answered as the
intent it negates; an out-of-scope question is out of scope, with the score and threshold
that decided; a GBK file streamed with ``predict --data F --out O`` answers every row and
carries the session id. A check the model fails is a failed step: it is reported, not
relaxed.

Exit status 0 when every step passed; the table of steps (part, command, seconds, verdict)
is printed either way, and, unless ``--no-write``, stored (with its provenance) in
``benchmarks/results/walkthrough.json`` and written as the ``walkthrough`` section of its
page (``docs/benchmarks/serving.md``, beside ``--md``). Nothing here is timed for a
benchmark: the seconds say where the hour goes.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

SECTION = "walkthrough"
RESULTS = HERE / "results" / "walkthrough.json"
#: the README sections whose bash blocks the walkthrough runs, in order
SECTIONS = ("Intent recognition in four commands",)
#: the walkthrough page whose every bash block runs after the README's
DOC = ROOT / "docs" / "walkthrough.md"
#: the parts of the walkthrough, in the order they run
PARTS = ("README", "docs/walkthrough.md", "checks")

# --- the chat logs docs/walkthrough.md works on -------------------------------------------
#: the columns of the team's export (docs/walkthrough.md, *The export*)
SESSION, MESSAGE, INTENT = "会话ID", "客户消息", "意图"
#: the team's out-of-scope label (the page's ``--oos-labels 其他``)
TEAM_OOS = "其他"
#: the intents of the first export (a small team's, from the demo's 27)
FIRST_INTENTS = ("report_card_loss", "unfreeze_card", "reissue_card", "cancel_card",
                 "enable_autopay", "cancel_autopay", "bill_query", "credit_limit_increase")
#: the intent that arrives later (the page's section 7)
NEW_INTENT = "refund_query"
#: the encoding Chinese Excel saves a CSV in
EXPORT_ENCODING = "gbk"
#: the command that writes them, run in the scratch folder after the demo
CHAT_LOGS_COMMAND = "python benchmarks/walkthrough.py --chat-logs headwise-demo/data"


@dataclass
class Step:
    """One command of the walkthrough and what became of it."""

    command: str
    part: str = "README"
    seconds: float = 0.0
    ok: bool = False
    why: str = ""
    output: str = field(default="", repr=False)


def bash_commands(text: str) -> list[str]:
    """The commands of the fenced ``bash`` blocks of a markdown text, in order: comments
    stripped, ``\\`` continuations joined, blank lines dropped."""
    out: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S):
        joined = re.sub(r"[ \t]*\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = _strip_comment(line).strip()
            if line:
                out.append(line)
    return out


def readme_commands(readme: Path, sections: tuple[str, ...] = SECTIONS) -> list[str]:
    """The commands of the fenced ``bash`` blocks under the given headings, in file order
    (:func:`bash_commands`).

    Raises:
        ValueError: a heading that is missing or has no bash block.
    """
    text = readme.read_text(encoding="utf-8")
    out: list[str] = []
    for title in sections:
        m = re.search(rf"^#+ {re.escape(title)}.*?$(.*?)(?=^#+ |\Z)", text, re.M | re.S)
        if not m:
            raise ValueError(f"README has no section {title!r}")
        commands = bash_commands(m.group(1))
        if not commands:
            raise ValueError(f"README section {title!r} has no bash block")
        out += commands
    return out


def doc_commands(doc: Path = DOC) -> list[str]:
    """The commands of every fenced ``bash`` block of a page (``docs/walkthrough.md``), in
    order (:func:`bash_commands`).

    Raises:
        ValueError: the page has no bash block.
    """
    commands = bash_commands(doc.read_text(encoding="utf-8"))
    if not commands:
        raise ValueError(f"{doc} has no bash block")
    return commands


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


def write_chat_logs(demo_data: Path, out_dir: Path) -> dict[str, int]:
    """Write the files ``docs/walkthrough.md`` works on, GBK-encoded as Chinese Excel saves
    a CSV, from the demo's corpus (``headwise-demo/data/{train,valid,test}.csv``):

    * ``logs.csv`` (``会话ID,客户消息,意图``): the training and validation rows of
      :data:`FIRST_INTENTS` and the out-of-scope rows, labelled ``其他``;
    * ``test.csv``: the same of the test split (another week of logs);
    * ``new_logs.csv`` (``会话ID,客户消息``): the test split's messages of those labels,
      unlabelled, to answer;
    * ``logs_v2.csv`` and ``test_v2.csv``: ``logs.csv`` and ``test.csv`` with the rows of
      :data:`NEW_INTENT` added, the intent that arrives later.

    Session ids are ``S`` and six digits, distinct, from a seeded stream.

    Returns:
        File name -> rows written.

    Raises:
        FileNotFoundError: a split of the demo's corpus is missing.
        UnicodeEncodeError: a message GBK cannot encode.
    """
    def rows(split: str, intents: tuple[str, ...]) -> list[tuple[str, str]]:
        path = demo_data / f"{split}.csv"
        with path.open(encoding="utf-8", newline="") as f:
            return [(r["text"], TEAM_OOS if r["label"] == "oos" else r["label"])
                    for r in csv.DictReader(f) if r["label"] in (*intents, "oos")]

    ids = (f"S{n}" for n in random.Random(0).sample(range(100000, 1000000), 100000))
    first, later = FIRST_INTENTS, (*FIRST_INTENTS, NEW_INTENT)
    train = rows("train", first) + rows("valid", first)
    train_v2 = rows("train", later) + rows("valid", later)
    test, test_v2 = rows("test", first), rows("test", later)
    tables = {
        "logs.csv": [(next(ids), t, y) for t, y in train],
        "test.csv": [(next(ids), t, y) for t, y in test],
        "new_logs.csv": [(next(ids), t) for t, _ in test],
        "logs_v2.csv": [(next(ids), t, y) for t, y in train_v2],
        "test_v2.csv": [(next(ids), t, y) for t, y in test_v2],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        buf = io.StringIO()
        writer = csv.writer(buf)  # \r\n line ends, as Excel writes them
        writer.writerow([SESSION, MESSAGE, INTENT][:len(table[0])])
        writer.writerows(table)
        (out_dir / name).write_bytes(buf.getvalue().encode(EXPORT_ENCODING))
    return {name: len(table) for name, table in tables.items()}


# --- checking an output -------------------------------------------------------------------
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
        return stream_why(words, workdir)  # a file streamed to a file
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
    if words[:2] == ["headwise", "doctor"] and "--out" in words:
        out = workdir / words[words.index("--out") + 1]
        written = [out / "index.html", out / "issues.csv"]
        if "--out-data" in words:
            written.append(workdir / words[words.index("--out-data") + 1])
        missing = [str(x.relative_to(workdir)) for x in written if not x.is_file()]
        return f"{', '.join(missing)} not written" if missing else ""
    if words[:2] == ["headwise", "train"] and "--out" in words:
        out = workdir / words[words.index("--out") + 1]
        return "" if out.is_dir() else f"{out} was not written"
    return ""


def _decode(data: bytes) -> str:
    """A file's text as ``headwise`` detects it: UTF-8 (a byte-order mark dropped), else
    GB18030 (which reads GBK)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("gb18030")


def _table(text: str, delimiter: str = ",") -> list[dict[str, str]]:
    """The rows of a CSV text with a header, blank lines dropped."""
    rows = [r for r in csv.reader(io.StringIO(text), delimiter=delimiter) if any(r)]
    return [dict(zip(rows[0], r, strict=False)) for r in rows[1:]] if rows else []


def stream_why(words: list[str], workdir: Path) -> str:
    """Why ``headwise predict MODEL --data FILE --out OUT [--columns TEXT,KEEP...]`` broke
    its promise, or ``""``: ``OUT`` holds one answer (``intents``, ``out_of_scope``) per
    row of ``FILE``, in order, and each carries the kept columns with the row's values. A
    ``FILE`` other than CSV or TSV is only checked for ``OUT`` being written."""
    out = workdir / words[words.index("--out") + 1]
    if not out.is_file() or not out.stat().st_size:
        return f"{out.name} was not written"
    data = workdir / words[words.index("--data") + 1]
    if data.suffix.lower() not in (".csv", ".tsv") or not data.is_file():
        return ""
    keep = words[words.index("--columns") + 1].split(",")[1:] if "--columns" in words else []
    rows = _table(_decode(data.read_bytes()), "\t" if data.suffix.lower() == ".tsv" else ",")
    text = out.read_text(encoding="utf-8")
    try:
        answers = ([json.loads(x) for x in text.splitlines() if x.strip()]
                   if out.suffix.lower() == ".jsonl" else _table(text))
    except json.JSONDecodeError as err:
        return f"{out.name}: not JSON lines ({err})"
    if len(answers) != len(rows):
        return f"{len(answers)} answers in {out.name} for {len(rows)} rows of {data.name}"
    if any("intents" not in a or "out_of_scope" not in a for a in answers):
        return f"an answer in {out.name} lacks intents / out_of_scope"
    for name in keep:
        got, want = [str(a.get(name)) for a in answers], [r.get(name) for r in rows]
        if got != want:
            at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
            return f"column {name} not carried: answer {at + 1} has {got[at]!r}, row has " \
                   f"{want[at]!r}"
    return ""


def _one_record(output: str) -> tuple[dict[str, Any] | None, str]:
    """The one ``--json`` record of an output, or None and why not."""
    lines = [x for x in output.splitlines() if x.strip()]
    if len(lines) != 1:
        return None, f"{len(lines)} lines for one text"
    try:
        return json.loads(lines[0]), ""
    except json.JSONDecodeError:
        return None, f"not a JSON line: {lines[0][:120]!r}"


def _answered(rec: dict[str, Any]) -> str:
    """How an answer reads: its intent and confidence, or out of scope."""
    if rec.get("out_of_scope") or not rec.get("intents"):
        return "out of scope"
    top = rec["intents"][0]
    return f"{top['intent']} ({top['confidence']:.2f})"


def _decision_words(rec: dict[str, Any]) -> str:
    d = rec.get("decision") or {}
    return f"{d.get('score')} {d.get('value')} vs threshold {d.get('threshold')}"


@dataclass(frozen=True)
class Check:
    """A query a user would try on the trained model, and what its answer must show.

    Attributes:
        name: what it checks.
        command: the command run (in the scratch folder, after the README's steps).
        verify: ``(output, workdir) -> why it fails`` (``""``: passed).
    """

    name: str
    command: str
    verify: Callable[[str, Path], str]


#: the model the checks query: the README's, trained on the demo's training split
CHECK_MODEL = "runs/intent"
#: a request inside chatter over several times the model's 64 tokens (one character a
#: token): the request is the intent the answer must name
LONG_REQUEST = ("麻烦帮我把那张丢了的信用卡赶紧挂失一下", "report_card_loss")
LONG_MESSAGE = (
    "你好，我先把情况讲清楚。我这个星期在外地出差，白天跟客户开会，晚上还要回酒店赶材料，"
    "前天晚上开完会跟同事出去吃了顿火锅，回来的路上下起了大雨，我们俩在路边等了快半个小时"
    "才打到车，到酒店的时候浑身都湿透了，第二天早上起来收拾东西才发现外套口袋里空空的，"
    + LONG_REQUEST[0] +
    "。另外我下周一才能回去，家里的孩子还在等我带礼物，酒店前台说他们会帮我留意一下有没有人"
    "捡到，我自己也回那家火锅店问过了，店员说没看到，真是太倒霉了，谢谢你们，辛苦了。")
#: a request negated: the answer must not be the intent it negates
NEGATION = ("我不想开通自动还款，每个月我习惯自己来还", "enable_autopay")
#: a question of no banking intent
OUT_OF_SCOPE_QUESTION = "周末想带孩子去动物园，需要提前预约门票吗？"


def check_long_message(output: str, workdir: Path) -> str:
    """The long message's answer names the request (:data:`LONG_REQUEST`) and its
    ``long_text`` says what was done with the length (tokens over the model's)."""
    rec, why = _one_record(output)
    if rec is None:
        return why
    want = LONG_REQUEST[1]
    if rec.get("out_of_scope") or not rec.get("intents") or rec["intents"][0]["intent"] != want:
        return f"answered {_answered(rec)}, not the request {want}"
    note = rec.get("long_text")
    if not note:
        return "no long_text note: the answer does not say what was done with the length"
    if not note.get("policy") or not note.get("tokens", 0) > note.get("max_length", 0):
        return f"long_text {note} does not say how a text over the length was read"
    return ""


def check_negation(output: str, workdir: Path) -> str:
    """The negated request is not answered as the intent it negates (:data:`NEGATION`)."""
    rec, why = _one_record(output)
    if rec is None:
        return why
    negated = NEGATION[1]
    if rec.get("intents") and rec["intents"][0]["intent"] == negated:
        return f"answered the negated intent {_answered(rec)}"
    return ""


def check_out_of_scope(output: str, workdir: Path) -> str:
    """The question is out of scope, and its ``decision`` gives the score and the threshold
    that decided (the value below the threshold)."""
    rec, why = _one_record(output)
    if rec is None:
        return why
    d = rec.get("decision")
    if not isinstance(d, dict) or not isinstance(d.get("score"), str) or not all(
            isinstance(d.get(k), (int, float)) for k in ("value", "threshold")):
        return f"no decision with a score, value and threshold: {d!r}"
    if not rec.get("out_of_scope") or rec.get("intents"):
        return f"answered {_answered(rec)} in scope ({_decision_words(rec)})"
    if not d["value"] < d["threshold"]:
        return f"out of scope, but its decision does not reject it ({_decision_words(rec)})"
    return ""


#: a GBK file of the team's (written by :func:`write_chat_logs`) streamed to JSON lines
GBK_STREAM = (f"headwise predict {CHECK_MODEL} --data new_logs.csv --columns {MESSAGE},{SESSION} "
              f"--out new_logs.answers.jsonl")


def check_gbk_stream(output: str, workdir: Path) -> str:
    """The streamed file (:data:`GBK_STREAM`) is GBK, not UTF-8, and every row of it is
    answered with its session id (:func:`stream_why`)."""
    words = shlex.split(GBK_STREAM)
    data = words[words.index("--data") + 1]
    path = workdir / data
    if not path.is_file():
        return f"{data} was not written"
    try:
        path.read_bytes().decode("utf-8")
        return f"{data} is UTF-8, not GBK: the check would not test the encoding"
    except UnicodeDecodeError:
        pass
    return stream_why(words, workdir)


def _json_query(text: str) -> str:
    return f"headwise predict {CHECK_MODEL} --json {shlex.quote(text)}"


#: the checked queries, run after the walkthrough page on :data:`CHECK_MODEL`
CHECKS: tuple[Check, ...] = (
    Check("long message", _json_query(LONG_MESSAGE), check_long_message),
    Check("negation", _json_query(NEGATION[0]), check_negation),
    Check("out-of-scope question", _json_query(OUT_OF_SCOPE_QUESTION), check_out_of_scope),
    Check("GBK file streamed", GBK_STREAM, check_gbk_stream),
)


# --- running ------------------------------------------------------------------------------
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


@dataclass(frozen=True)
class Planned:
    """A step to run: its part, its command and the check of its output (None:
    :func:`check_output`)."""

    part: str
    command: str
    verify: Callable[[str, Path], str] | None = None


def plan(readme: list[str], doc: list[str], demo: str) -> list[Planned]:
    """The walkthrough's steps in order: the demo and the README's commands, the chat logs
    and the page's commands, the checks."""
    return [Planned("README", demo), *(Planned("README", c) for c in readme),
            Planned("docs/walkthrough.md", CHAT_LOGS_COMMAND),
            *(Planned("docs/walkthrough.md", c) for c in doc),
            *(Planned(f"check: {c.name}", c.command, c.verify) for c in CHECKS)]


def _stop(servers: list[subprocess.Popen]) -> None:
    for proc in servers:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    servers.clear()


def run_steps(workdir: Path, planned: list[Planned]) -> list[Step]:
    """Run every step in ``workdir``, the first (the demo) before all others, which do not
    run when it fails; the background servers of a part are stopped when the next part
    starts, and at the end."""
    env = {**os.environ, "PATH": f"{workdir / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(workdir), "PYTHONUNBUFFERED": "1"}
    steps: list[Step] = []
    servers: list[subprocess.Popen] = []
    try:
        for i, p in enumerate(planned):
            if steps and steps[-1].part.split(":")[0] != p.part.split(":")[0]:
                _stop(servers)
            step = Step(p.command, p.part)
            start = time.perf_counter()
            if p.command.endswith("&"):
                proc = subprocess.Popen(["bash", "-c", p.command[:-1]], cwd=workdir, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
                servers.append(proc)
                m = re.search(r"--port\s+(\d+)", p.command)
                port = int(m.group(1)) if m else 8000
                step.ok = wait_ready(port)
                step.why = "" if step.ok else f"no 200 from :{port}/readyz"
            else:
                done = subprocess.run(["bash", "-c", p.command], cwd=workdir, env=env,
                                      capture_output=True, text=True, timeout=3600)
                step.output = done.stdout
                if done.returncode != 0:
                    step.why = f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
                else:
                    step.why = (p.verify(done.stdout, workdir) if p.verify else
                                check_output(p.command, done.stdout, workdir))
                step.ok = not step.why
            step.seconds = time.perf_counter() - start
            steps.append(step)
            print(f"{'ok ' if step.ok else 'FAIL'} {step.seconds:7.1f} s  [{p.part}] "
                  f"{_short(p.command)}" + (f"\n      {step.why}" if step.why else ""),
                  flush=True)
            if not step.ok and i == 0:
                break
    finally:
        _stop(servers)
    return steps


def _short(command: str, limit: int = 160) -> str:
    return command if len(command) <= limit else command[:limit - 1] + "…"


def section(data: dict) -> str:
    """The ``walkthrough`` section of a results file, the machine line under its heading."""
    where = ("a fresh `git clone` of HEAD set up by its own `./run`" if data["fresh"] else
             "a scratch copy of the working tree with this checkout's `.venv`")
    rows = [[s["part"],
             f"`{_short(s['command'])}`".replace("|", "\\|")
             + (" (until `/readyz` is 200)" if s["command"].endswith("&") else ""),
             f"{s['seconds']:.1f}", "ok" if s["ok"] else f"FAIL: {s['why']}".replace("|", "/")
             .replace("\n", " ")]
            for s in data["steps"]]
    passed, ran = sum(s["ok"] for s in data["steps"]), len(data["steps"])
    failed_checks = [s["part"].split(": ", 1)[1] for s in data["steps"]
                     if s["part"].startswith("check: ") and not s["ok"]]
    return H.with_machine_line("\n".join([
        "## The README's first hour and the walkthrough, run as written", "",
        f"`{data['command']}` ({data['date']}; {where}). After `{data['demo']}`, each command "
        f"of the README's {' and '.join(f'*{x}*' for x in SECTIONS)}, then each command of "
        f"[the walkthrough](../walkthrough.md) on a GBK export written from the demo's "
        f"corpus (`{CHAT_LOGS_COMMAND}`), must exit 0 and print what the page promises; "
        f"then four queries written by hand check the answers of the README's model "
        f"(`{CHECK_MODEL}`): a long message names its request and says what was done with "
        f"the length, a negated request is not answered as the intent it negates, an "
        f"out-of-scope question is rejected with the score and threshold that decided, and "
        f"a GBK file streamed to a file answers every row with its session id.", "",
        H.markdown_table(["part", "step", "seconds", "verdict"], rows, "llrl"), "",
        f"{passed} of {data['planned']} steps passed"
        + (f"; {data['planned'] - ran} not run after the demo failed"
           if ran < data["planned"] else "")
        + (f"; checks failed: {', '.join(failed_checks)}" if failed_checks else "") + "."]),
        [data])


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
    p.add_argument("--chat-logs", type=Path, metavar="DEMO_DATA",
                   help="only write the GBK chat logs docs/walkthrough.md works on into the "
                        "current folder, from the demo's corpus in DEMO_DATA "
                        "(headwise-demo/data), and stop")
    args = p.parse_args(argv)
    if args.chat_logs is not None:
        counts = write_chat_logs(args.chat_logs, Path.cwd())
        print(", ".join(f"{name}: {n} rows" for name, n in counts.items())
              + f" ({EXPORT_ENCODING})")
        return 0
    data = {"command": H.command_line(), "fresh": args.fresh,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "provenance": H.collect_provenance()}
    demo = "./run demo" if args.full_demo else "./run demo --quick"
    planned = plan(readme_commands(ROOT / "README.md"), doc_commands(DOC), demo)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="headwise-walkthrough-")) / "headwise"
    if workdir.exists():
        shutil.rmtree(workdir)
    prepare(workdir, args.fresh)
    try:
        steps = run_steps(workdir, planned)
    finally:
        if args.keep is None:
            shutil.rmtree(workdir.parent, ignore_errors=True)
    failed = [s for s in steps if not s.ok]
    ran = len(steps)
    data.update(demo=demo, planned=len(planned), provenance=H.finish_provenance(
        data["provenance"]), steps=[{"part": s.part, "command": s.command,
                                     "seconds": s.seconds, "ok": s.ok, "why": s.why}
                                    for s in steps])
    if not args.no_write:
        RESULTS.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n",
                           encoding="utf-8")
        H.write_section(args.md, SECTION, section(data))
    print(f"\n{ran - len(failed)} of {len(planned)} steps passed"
          + (f"; {len(planned) - ran} not run after the demo failed"
             if ran < len(planned) else ""))
    for s in failed:
        print(f"FAIL [{s.part}] {_short(s.command)}\n      {s.why}")
    return 1 if failed or ran < len(planned) else 0


if __name__ == "__main__":
    sys.exit(main())

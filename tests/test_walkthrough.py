"""benchmarks/walkthrough.py: the README's commands as it reads them, and its output checks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import walkthrough as W  # noqa: E402


def test_it_reads_the_readme_commands_in_order(tmp_path):
    commands = W.readme_commands(ROOT / "README.md")
    verbs = [c.split("|")[-1].split()[:2] for c in commands]
    # train before eval before predict, a server before the request it answers
    order = [v for v in verbs if v[0] in ("headwise", "curl")]
    assert [v[1] if v[0] == "headwise" else "curl" for v in order] == [
        "train", "eval", "predict", "predict", "serve", "curl"]
    assert all("\\" not in c and "#" not in c.split("'")[0] for c in commands)
    readme = tmp_path / "README.md"
    readme.write_text("# A\n## Intent recognition in four commands\n```bash\nheadwise train \\\n"
                      "  --data 'a # b.csv' --out r   # train\n\n```\n## Querying the service\n"
                      "```bash\ncurl -s x\n```\n## Next\n```bash\nnot me\n```\n")
    sections = ("Intent recognition in four commands", "Querying the service")
    assert W.readme_commands(readme, sections) == ["headwise train --data 'a # b.csv' --out r",
                                                   "curl -s x"]


def test_output_checks_hold_the_readme_to_its_promises(tmp_path):
    rec = {"intents": [{"intent": "a", "confidence": 0.9}], "out_of_scope": False,
           "slots": [], "top_k": [], "decision": None}
    assert W.check_output("echo x | headwise predict m --json", json.dumps(rec), tmp_path) == ""
    bad = json.dumps({"intents": []})
    assert "lacks" in W.check_output("headwise predict m --json x", bad, tmp_path)
    assert W.check_output('headwise predict m "a" "b"', "a -> x\nb -> y\n", tmp_path) == ""
    assert "1 lines for 2" in W.check_output('headwise predict m "a" "b"', "a\n", tmp_path)
    stream = "headwise predict m --data logs.csv --columns 消息,会话ID --out answers.csv"
    assert "was not written" in W.check_output(stream, "", tmp_path)
    (tmp_path / "answers.csv").write_text("line,会话ID,text\n2,S1,x\n", encoding="utf-8")
    assert W.check_output(stream, "", tmp_path) == ""
    assert W.check_output("headwise eval m --data t.csv", "accuracy 0.9 macro-F1 0.8",
                          tmp_path) == ""
    assert "was not written" in W.check_output("headwise train --data d --out r", "", tmp_path)
    body = json.dumps({"predictions": [{"intents": []}, {"intents": []}]})
    curl = "curl -s h -d '{\"texts\": [\"x\", \"y\"]}'"
    assert W.check_output(curl, body, tmp_path) == ""
    assert "1 predictions for 2" in W.check_output(
        curl, json.dumps({"predictions": [{"intents": []}]}), tmp_path)

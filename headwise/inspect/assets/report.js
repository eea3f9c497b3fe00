"use strict";
// The head-analysis report: everything is drawn from the JSON in <script id="data">.
const D = JSON.parse(document.getElementById("data").textContent);
const L = D.model.layers, H = D.model.heads;
// what "accuracy" measures: the top intent, or a compound model's exact match of the intent set
const SCORE = D.score || "accuracy";
const FONT = '"Noto Sans CJK SC", "WenQuanYi Micro Hei", "Microsoft YaHei", "PingFang SC", sans-serif';
const CAT_COLORS = ["#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#0550ae", "#9a6700"];
const state = { layer: 0, head: 0, example: 0, color: "importance" };
const $ = (id) => document.getElementById(id);
const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
};
const fmt = (x, d = 3) => (x === null || x === undefined || Number.isNaN(x)) ? "–" : Number(x).toFixed(d);
const pct = (x) => (x === null || x === undefined) ? "–" : (100 * x).toFixed(1) + "%";

function heat(t) { // 0..1 -> white..blue
  t = Math.max(0, Math.min(1, t));
  const r = Math.round(255 - 200 * t), g = Math.round(255 - 140 * t), b = Math.round(255 - 40 * t);
  return `rgb(${r},${g},${b})`;
}
function diverging(t) { // -1..1 -> red..white..blue
  t = Math.max(-1, Math.min(1, t));
  if (t < 0) { const s = -t; return `rgb(255,${Math.round(255 - 170 * s)},${Math.round(255 - 170 * s)})`; }
  return heat(t);
}

// ---- summary -----------------------------------------------------------------------------
function summary() {
  const m = D.model, d = D.data;
  const parts = [`${m.type}: ${m.layers} layers × ${m.heads} heads, ${m.intents} intents, ${m.pooling} pooling`,
    `${d.examples} examples (${d.labelled} with a known intent), ${fmt(d.mean_units, 1)} units on average, longest ${d.max_tokens} tokens`,
    `categories from ${D.category_source}: ${D.categories.join(", ")}`];
  if (D.accuracy !== null) parts.push(`${SCORE} ${pct(D.accuracy)}`);
  const C = D.compound;
  if (C) {
    const heads = (hs) => hs.length ? hs.map(([l, h]) => `L${l}H${h}`).join(", ") : "none";
    parts.push(`compound model: heads on join words ${heads(C.join_heads)} (${C.texts_with_join} texts with a join word); ` +
      `heads on numbers of the second request ${heads(C.number_in_second_heads)} (${C.texts_with_number_in_second} texts with one)`);
  }
  const A = D.negation_agreement;
  if (A) {
    if (A.share === null) parts.push(`negation heads vs attribution: ${A.verdict}`);
    else parts.push(`negation heads vs attribution on ${A.texts} negated texts: ${A.verdict} ` +
      `(the negation heads put more of their rollout on the deciding tokens than the other heads on ${pct(A.share)} ` +
      `[${pct(A.interval[0])}, ${pct(A.interval[1])}]; ${fmt(A.role_mass)} vs ${fmt(A.other_mass)}; ` +
      `a negation word among the deciding tokens on ${pct(A.role_word_deciding)})`);
  }
  $("summary").textContent = parts.join(" · ");
}

// ---- head grid ---------------------------------------------------------------------------
function colorValue(l, h) {
  const c = state.color;
  if (c === "importance") return D.importance ? [D.importance.gradient[l][h], heat] : [null, heat];
  if (c === "ablation") {
    if (!D.ablation) return [null, heat];
    const v = D.ablation.delta[l][h];
    return [v, (x) => diverging(x / 0.05)];
  }
  if (c === "entropy") return [D.stats.views.words.entropy_norm[l][h], heat];
  if (c === "special") return [D.stats.views.raw.special[l][h], heat];
  const cat = c.slice(5);
  const lift = D.stats.views.words.categories[cat].lift[l][h];
  return [lift, (x) => heat((x - 1) / 3)];
}
function grid() {
  const sel = $("color");
  const opts = [["importance", "importance (gate gradient)"], ["ablation", `ablation: ${SCORE} change`],
    ["entropy", "entropy / log n"], ["special", "mass on special tokens"]]
    .concat(D.categories.map((c) => ["lift:" + c, `lift on ${c}`]));
  for (const [v, t] of opts) sel.append(el("option", { value: v, text: t }));
  sel.addEventListener("change", () => { state.color = sel.value; drawGrid(); });
  drawGrid();
}
function drawGrid() {
  const t = $("grid");
  t.textContent = "";
  const head = el("tr", {}, el("th", { text: "layer \\ head" }));
  for (let h = 0; h < H; h++) head.append(el("th", { text: String(h) }));
  t.append(head);
  for (let l = 0; l < L; l++) {
    const tr = el("tr", {}, el("th", { text: String(l) }));
    for (let h = 0; h < H; h++) {
      const [v, scale] = colorValue(l, h);
      const roles = D.roles[l][h];
      const td = el("td", { class: "cell" + (l === state.layer && h === state.head ? " sel" : ""),
        title: roles.map((r) => `${r.role}: ${r.evidence}`).join("\n") || "no role" });
      td.style.background = v === null ? "#f6f8fa" : scale(v);
      td.append(el("div", { class: "small", text: v === null ? "–" : fmt(v, 2) }));
      for (const r of roles.slice(0, 3)) td.append(el("span", { class: "tag", text: r.role }));
      td.addEventListener("click", () => selectHead(l, h));
      tr.append(td);
    }
    t.append(tr);
  }
}
function selectHead(l, h) {
  state.layer = l; state.head = h;
  $("sel-layer").value = String(l); $("sel-head").value = String(h);
  drawGrid(); headDetail(); drawExample();
}
function headDetail() {
  const l = state.layer, h = state.head, box = $("detail");
  box.textContent = "";
  box.append(el("h3", { text: `Layer ${l}, head ${h}` }));
  const roles = D.roles[l][h];
  const ul = el("ul", { class: "evidence" });
  if (!roles.length) ul.append(el("li", { text: "no role: no statistic crosses a threshold" }));
  for (const r of roles) ul.append(el("li", {}, el("b", { text: r.role + ": " }), r.evidence));
  box.append(ul);
  const rows = [["entropy (nats)", "entropy"], ["entropy / log n", "entropy_norm"], ["confidence (mean max)", "confidence"],
    ["mean distance", "distance"], ["previous", "prev"], ["same", "same"], ["next", "next"], ["special tokens", "special"]];
  const t = el("table", {}, el("tr", {}, el("th", { text: "statistic" }), el("th", { text: "raw" }), el("th", { text: "words only" })));
  for (const [name, key] of rows) {
    const v = D.stats.views;
    t.append(el("tr", {}, el("td", { text: name }), el("td", { class: "num", text: fmt(v.raw[key] ? v.raw[key][l][h] : null) }),
      el("td", { class: "num", text: fmt(v.words[key] ? v.words[key][l][h] : null) })));
  }
  for (const c of D.categories) {
    const w = D.stats.views.words.categories[c];
    t.append(el("tr", {}, el("td", { text: `${c}: mass / lift (raw); mass / share / lift / top-key share (words)` }),
      el("td", { class: "num", text: [fmt(D.stats.views.raw.categories[c].mass[l][h]), fmt(D.stats.views.raw.categories[c].lift[l][h], 2)].join(" / ") }),
      el("td", { class: "num", text: [fmt(w.mass[l][h]), fmt(w.share[l][h]), fmt(w.lift[l][h], 2), fmt(w.top_share[l][h])].join(" / ") })));
  }
  if (D.importance) t.append(el("tr", {}, el("td", { text: "importance (layer-normalised)" }), el("td", { class: "num", text: fmt(D.importance.gradient[l][h]) }), el("td", {})));
  if (D.ablation) t.append(el("tr", {}, el("td", { text: `ablation: ${SCORE} change` }), el("td", { class: "num", text: fmt(D.ablation.delta[l][h], 4) }), el("td", {})));
  box.append(t);
}

// ---- per-example head view ---------------------------------------------------------------
function decode(b64) {
  const s = atob(b64), out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}
const decoded = new Map();
function examples() {
  const sel = $("sel-example");
  D.examples.forEach((ex, i) => {
    const mark = ex.correct === false ? "✗ " : "";
    sel.append(el("option", { value: String(i), text: `${mark}#${ex.index} ${ex.text.slice(0, 40)}` }));
  });
  sel.addEventListener("change", () => { state.example = Number(sel.value); drawExample(); });
  const sl = $("sel-layer"), sh = $("sel-head");
  for (let l = 0; l < L; l++) sl.append(el("option", { value: String(l), text: `layer ${l}` }));
  for (let h = 0; h < H; h++) sh.append(el("option", { value: String(h), text: `head ${h}` }));
  sl.addEventListener("change", () => selectHead(Number(sl.value), state.head));
  sh.addEventListener("change", () => selectHead(state.layer, Number(sh.value)));
  drawExample();
}
function unitColor(ex, u) {
  let k = 0;
  for (const c of D.categories) { if ((ex.categories[c] || []).includes(u)) return CAT_COLORS[k % CAT_COLORS.length]; k++; }
  return ex.special[u] ? "#8c959f" : "#1f2328";
}
function drawExample() {
  const cv = $("heatmap"), info = $("example-info");
  if (!D.examples.length) { info.textContent = "no example embedded"; return; }
  const ex = D.examples[state.example], n = ex.units.length;
  if (!decoded.has(state.example)) decoded.set(state.example, decode(ex.weights));
  const w = decoded.get(state.example), off = ((state.layer * H) + state.head) * n * n;
  info.textContent = `#${ex.index} gold ${ex.gold ?? "–"} · predicted ${ex.predicted} (${pct(ex.confidence)})` +
    (ex.truncated ? ` · ${ex.truncated} more units not shown` : "");
  const cell = Math.max(8, Math.min(28, Math.floor(560 / Math.max(n, 1))));
  const pad = 90, width = pad + n * cell + 10, height = pad + n * cell + 46;
  const dpr = window.devicePixelRatio || 1;
  cv.width = width * dpr; cv.height = height * dpr;
  cv.style.width = width + "px"; cv.style.height = height + "px";
  const g = cv.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.fillStyle = "#fff"; g.fillRect(0, 0, width, height);
  let peak = 1;
  for (let k = 0; k < n * n; k++) peak = Math.max(peak, w[off + k]);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
    g.fillStyle = heat(w[off + i * n + j] / peak);
    g.fillRect(pad + j * cell, pad + i * cell, cell, cell);
  }
  const size = Math.max(9, Math.min(14, cell - 2));
  g.font = `${size}px ${FONT}`;
  g.textBaseline = "middle";
  for (let i = 0; i < n; i++) {
    const label = ex.units[i].length > 8 ? ex.units[i].slice(0, 7) + "…" : ex.units[i];
    g.fillStyle = unitColor(ex, i);
    g.textAlign = "right"; g.fillText(label, pad - 4, pad + i * cell + cell / 2);
    g.save(); g.translate(pad + i * cell + cell / 2, pad - 4); g.rotate(-Math.PI / 2);
    g.textAlign = "left"; g.fillText(label, 0, 0); g.restore();
  }
  // rollout of the classification token, as a bar under the map
  const top = pad + n * cell + 8, maxr = Math.max(...ex.rollout, 1e-9);
  for (let j = 0; j < n; j++) {
    g.fillStyle = heat(ex.rollout[j] / maxr);
    g.fillRect(pad + j * cell, top, cell, 14);
  }
  g.fillStyle = "#59636e"; g.font = `11px ${FONT}`; g.textAlign = "right";
  g.fillText("rollout", pad - 4, top + 7);
  g.textAlign = "left"; g.fillText(`layer ${state.layer}, head ${state.head}: rows = queries, columns = keys; darkest = ${(peak / 255).toFixed(2)}`, pad, top + 30);
}

// ---- pruning curve -----------------------------------------------------------------------
function pruning() {
  const cv = $("pruning"), note = $("pruning-note");
  const P = D.pruning;
  if (!P) { note.textContent = "not measured (no labelled examples, or switched off)"; cv.style.display = "none"; return; }
  const W = 640, Ht = 340, m = { l: 56, r: 16, t: 16, b: 44 };
  cv.width = W; cv.height = Ht;
  const g = cv.getContext("2d");
  g.fillStyle = "#fff"; g.fillRect(0, 0, W, Ht);
  const all = P.importance.accuracy.concat(P.random.min, P.random.max, [P.base_accuracy]);
  const lo = Math.max(0, Math.min(...all) - 0.02), hi = Math.min(1, Math.max(...all) + 0.02);
  const x = (f) => m.l + f * (W - m.l - m.r), y = (a) => Ht - m.b - (a - lo) / (hi - lo || 1) * (Ht - m.t - m.b);
  g.strokeStyle = "#d1d9e0"; g.fillStyle = "#59636e"; g.font = `11px ${FONT}`;
  for (let k = 0; k <= 10; k++) {
    const f = k / 10; g.beginPath(); g.moveTo(x(f), m.t); g.lineTo(x(f), Ht - m.b); g.stroke();
    g.textAlign = "center"; g.fillText(`${k * 10}%`, x(f), Ht - m.b + 14);
  }
  for (let k = 0; k <= 5; k++) {
    const a = lo + (hi - lo) * k / 5; g.beginPath(); g.moveTo(m.l, y(a)); g.lineTo(W - m.r, y(a)); g.stroke();
    g.textAlign = "right"; g.fillText(pct(a), m.l - 4, y(a) + 4);
  }
  g.textAlign = "center"; g.fillText("share of heads removed", (m.l + W - m.r) / 2, Ht - 8);
  g.setLineDash([4, 4]); g.strokeStyle = "#8c959f";
  g.beginPath(); g.moveTo(m.l, y(P.base_accuracy - P.tolerance)); g.lineTo(W - m.r, y(P.base_accuracy - P.tolerance)); g.stroke();
  g.setLineDash([]);
  g.fillStyle = "rgba(207,34,46,0.15)"; g.beginPath();
  P.random.fraction.forEach((f, i) => (i ? g.lineTo(x(f), y(P.random.max[i])) : g.moveTo(x(f), y(P.random.max[i]))));
  for (let i = P.random.fraction.length - 1; i >= 0; i--) g.lineTo(x(P.random.fraction[i]), y(P.random.min[i]));
  g.fill();
  const line = (fs, as, color) => {
    g.strokeStyle = color; g.fillStyle = color; g.lineWidth = 2; g.beginPath();
    fs.forEach((f, i) => (i ? g.lineTo(x(f), y(as[i])) : g.moveTo(x(f), y(as[i])))); g.stroke();
    fs.forEach((f, i) => { g.beginPath(); g.arc(x(f), y(as[i]), 3, 0, 2 * Math.PI); g.fill(); });
    g.lineWidth = 1;
  };
  line(P.random.fraction, P.random.accuracy, "#cf222e");
  line(P.importance.fraction, P.importance.accuracy, "#0969da");
  const mf = P.max_fraction_within;
  note.textContent = `${P.num_heads} heads, ${SCORE} measured on ${P.examples} examples. Within ${(100 * P.tolerance).toFixed(0)} point of the full model (${pct(P.base_accuracy)}): ` +
    `up to ${pct(mf.importance)} of the heads removed by importance, ${pct(mf.random)} at random (mean of ${P.random.runs.length} orders; band = min–max).`;
}

// ---- bad cases ---------------------------------------------------------------------------
function badCases() {
  const B = D.bad_cases, box = $("bad");
  if (B && B.by_slice && B.by_slice.length) {
    const t = el("table", {}, el("tr", {}, el("th", { text: "slice" }), el("th", { text: "examples" }), el("th", { text: "bad" }), el("th", { text: "share bad" }), el("th", { text: "listed below" })));
    for (const r of B.by_slice) t.append(el("tr", {}, el("td", { text: r.slice }), el("td", { class: "num", text: String(r.examples) }), el("td", { class: "num", text: String(r.bad) }), el("td", { class: "num", text: pct(r.share) }), el("td", { class: "num", text: String(r.listed) })));
    box.append(el("h3", { text: "Bad cases by slice" }), t);
  }
  if (!B || !B.cases.length) { box.append(el("p", { class: "muted", text: "no misclassified example with a correctly classified one of the same intent" })); return; }
  box.append(el("p", { class: "muted", text: `${B.misclassified} misclassified; ${B.without_reference} without a correct example of the same intent. Features: a head's attention mass on a category (mass:…) or its rollout share on it (rollout:…), compared with the mean of correct examples of the same intent.` }));
  if (B.heads.length) {
    const t = el("table", {}, el("tr", {}, el("th", { text: "head" }), el("th", { text: "feature" }), el("th", { text: "mean |difference|" })));
    for (const h of B.heads.slice(0, 8)) t.append(el("tr", { onclick: () => selectHead(h.layer, h.head) }, el("td", { text: `L${h.layer} H${h.head}` }), el("td", { text: h.feature }), el("td", { class: "num", text: fmt(h.mean_abs_diff) })));
    box.append(el("h3", { text: "Heads most implicated across the errors" }), t);
  }
  const shown = new Map(D.examples.map((e, i) => [e.index, i]));
  const t = el("table", { class: "bad" }, el("tr", {}, el("th", { text: "text (coloured by attribution to the predicted intent)" }), el("th", { text: "gold → predicted" }), el("th", { text: "heads that differ most (value vs correct mean)" })));
  for (const c of B.cases.slice(0, 40)) {
    const heads = c.heads.map((h) => `L${h.layer}H${h.head} ${h.feature} ${fmt(h.value, 2)} vs ${fmt(h.reference, 2)}`).join("; ");
    const tr = el("tr", {}, attributionCell(c), el("td", { text: `${c.gold} → ${c.predicted}` + (c.slices && c.slices.length ? ` [${c.slices.join(", ")}]` : "") }), el("td", { class: "small", text: heads }));
    tr.addEventListener("click", () => {
      if (c.heads.length) { state.layer = c.heads[0].layer; state.head = c.heads[0].head; }
      if (shown.has(c.index)) { state.example = shown.get(c.index); $("sel-example").value = String(state.example); }
      selectHead(state.layer, state.head); $("viewer").scrollIntoView();
    });
    t.append(tr);
  }
  box.append(t);
}

// a bad case's text, each word tinted by its attribution (integrated gradients) to the
// predicted intent: red for, blue against; the completeness check in the tooltip
function attributionCell(c) {
  const A = c.attribution, td = el("td");
  if (!A) { td.textContent = c.text || `#${c.index}`; return td; }
  const vals = A.attribution.filter((v) => v !== null), top = Math.max(1e-12, ...vals.map(Math.abs));
  A.units.forEach((u, i) => {
    const v = A.attribution[i];
    if (v === null) return;
    const s = el("span", { text: u, title: `${u}: ${fmt(v, 3)}` });
    const a = Math.min(1, Math.abs(v) / top);
    s.style.background = v >= 0 ? `rgba(214, 39, 40, ${0.65 * a})` : `rgba(31, 119, 180, ${0.65 * a})`;
    td.append(s);
  });
  const k = A.completeness;
  td.title = `attribution to ${A.intent}; completeness error ${fmt(k.error, 4)} (${pct(k.relative_error)}, tolerance ${pct(k.tolerance)})`;
  return td;
}

// ---- faithfulness and rollout ------------------------------------------------------------
// the explanation methods ranked by their deletion curves on this model (rank_methods)
const METHOD_NAMES = { ig: "integrated gradients", rollout: "attention rollout", attention: "last-layer attention", random: "random order" };
function methods(box) {
  const M = D.methods;
  if (!M) return;
  const verdict = M.most_faithful ? `most faithful here: ${METHOD_NAMES[M.most_faithful] || M.most_faithful} (its lead over every other method, paired text by text, has a 95 % interval above zero)`
    : `${METHOD_NAMES[M.leader] || M.leader} leads, within noise of another method`;
  box.append(el("p", { class: "small", text: `Explanation methods ranked by their deletion curves on ${M.texts} texts of this data: remove each method's top ${M.fractions.map((f) => Math.round(100 * f)).join(", ")} % of a text's tokens; the area is the mean drop of the predicted intent's probability (higher: the method's top tokens carry the decision). ${verdict}.` }));
  const t = el("table", { id: "methods" }, el("tr", {}, el("th", { text: "rank" }), el("th", { text: "method" }), el("th", { text: "area over the deletion curve [95 % CI]" }), el("th", { text: "leader minus this [95 % CI]" })));
  M.methods.forEach((r, i) => {
    const lead = M.leads[r.method];
    t.append(el("tr", { "data-method": r.method }, el("td", { class: "num", text: String(i + 1) }), el("td", { text: METHOD_NAMES[r.method] || r.method }),
      el("td", { class: "num", text: `${fmt(r.area)} [${fmt(r.low)}, ${fmt(r.high)}]` }),
      el("td", { class: "num", text: lead ? `${fmt(lead[0])} [${fmt(lead[1])}, ${fmt(lead[2])}]` : "–" })));
  });
  box.append(t);
}

function faith() {
  const F = D.faithfulness, R = D.rollout, box = $("faith");
  methods(box);
  const t = el("table", {}, el("tr", {}, el("th", { text: "score vs leave-one-out" }), el("th", { text: "mean τ" }), el("th", { text: "median τ" }), el("th", { text: "τ > 0" }), el("th", { text: "texts" })));
  for (const k of ["attention", "rollout"]) t.append(el("tr", {}, el("td", { text: k === "attention" ? "last-layer attention of the classification token" : "attention rollout" }),
    el("td", { class: "num", text: fmt(F[k].mean_tau) }), el("td", { class: "num", text: fmt(F[k].median_tau) }), el("td", { class: "num", text: pct(F[k].positive_share) }), el("td", { class: "num", text: String(F[k].n) })));
  box.append(t);
  const r = el("table", {}, el("tr", {}, el("th", { text: "rollout of the classification token" }), el("th", { text: "mass" }), el("th", { text: "share of units" }), el("th", { text: "lift" })));
  r.append(el("tr", {}, el("td", { text: "special tokens" }), el("td", { class: "num", text: fmt(R.special) }), el("td", {}), el("td", {})));
  for (const c of D.categories) r.append(el("tr", {}, el("td", { text: c }), el("td", { class: "num", text: fmt(R.categories[c].mass) }), el("td", { class: "num", text: fmt(R.categories[c].share) }), el("td", { class: "num", text: fmt(R.categories[c].lift, 2) })));
  box.append(r);
}

function legend() {
  const box = $("legend");
  D.categories.forEach((c, k) => { const s = el("span"); s.style.background = CAT_COLORS[k % CAT_COLORS.length]; box.append(s, c); });
}

summary(); grid(); headDetail(); examples(); legend(); pruning(); badCases(); faith();
document.body.dataset.renderMs = String(Math.round(performance.now()));
document.body.dataset.ready = "1";

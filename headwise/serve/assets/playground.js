// The playground page of the headwise service (headwise/serve/playground.py): vanilla
// JavaScript, no build step, no external URL. It calls the service's own API with the key
// the person gave (X-API-Key), and renders every answer with textContent (never as HTML).
(function () {
  "use strict";

  var KEY_STORE = "headwise.playground.key";
  var EXAMPLES = ["我的信用卡丢了，帮我冻结", "i lost my card, please freeze it"];
  var state = { key: "", heads: null, columns: [], running: false };

  function $(id) { return document.getElementById(id); }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      if (name === "text") node.textContent = attrs[name];
      else if (name === "class") node.className = attrs[name];
      else node.setAttribute(name, attrs[name]);
    });
    (children || []).forEach(function (c) {
      if (c !== null && c !== undefined) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }

  function pct(x) { return (100 * x).toFixed(1) + " %"; }
  function num(x) { return typeof x === "number" ? (Math.abs(x) >= 100 ? x.toFixed(1) : x.toFixed(3)) : String(x); }

  // --- the key: typed in, or in the URL fragment (never sent to a server), kept per tab ---
  function loadKey() {
    try { state.key = sessionStorage.getItem(KEY_STORE) || ""; } catch (e) { state.key = ""; }
    var m = /(?:^|&)key=([^&]*)/.exec(location.hash.replace(/^#/, ""));
    if (m) {
      setKey(decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname + location.search);  // out of the address bar
    }
    $("key").value = state.key;
  }

  function setKey(key) {
    state.key = key.trim();
    state.heads = null;
    try {
      if (state.key) sessionStorage.setItem(KEY_STORE, state.key);
      else sessionStorage.removeItem(KEY_STORE);
    } catch (e) { /* storage off: the key lives in this page only */ }
  }

  // --- the API ---------------------------------------------------------------------------
  function ApiError(status, type, message) {
    this.status = status; this.type = type; this.message = message;
  }

  function call(method, path, body) {
    var headers = { "Accept": "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (state.key) headers["X-API-Key"] = state.key;
    return fetch(path, {
      method: method, headers: headers, credentials: "omit", cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body)
    }).catch(function (e) {
      throw new ApiError(0, "network", "the service did not answer (" + e.message + ")");
    }).then(function (r) {
      return r.text().then(function (raw) {
        var data = null;
        try { data = JSON.parse(raw); } catch (e) { data = null; }
        if (!r.ok) {
          var err = data && data.error;
          throw new ApiError(r.status, err ? err.type : "http_error",
                             err ? err.message : (r.status + " " + r.statusText));
        }
        return data;
      });
    });
  }

  function errorBox(what, e) {
    var text = e instanceof ApiError
      ? what + ": " + (e.status ? e.status + " " : "") + e.type + " - " + e.message
      : what + ": " + String(e);
    return el("div", { "class": "error", role: "alert", "data-status": e && e.status ? String(e.status) : "", text: text });
  }

  function fetchHeads() {
    if (state.heads) return Promise.resolve(state.heads);
    return call("GET", "playground/heads").then(function (h) {
      state.heads = h;
      $("model").textContent = "model: " + h.model + (h.analysis ? " (head roles from its head analysis)" : "");
      return h;
    });
  }

  // --- columns: one message each, side by side ------------------------------------------
  function addColumn(text) {
    var index = state.columns.length;
    var area = el("textarea", { "class": "message", rows: "3", maxlength: "100000",
                                placeholder: "a message, e.g. " + EXAMPLES[index % 2] });
    area.value = text || "";
    area.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); run(); }
    });
    var remove = el("button", { type: "button", "class": "remove", title: "remove this message", text: "×" });
    var label = el("b", { text: "message " + (index + 1) });
    var result = el("div", { "class": "result" });
    var node = el("section", { "class": "column" }, [
      el("div", { "class": "column-head" }, [label, remove]), area, result]);
    var column = { node: node, area: area, result: result, label: label, answer: null };
    remove.addEventListener("click", function () {
      if (state.columns.length === 1) { area.value = ""; result.textContent = ""; return; }
      state.columns.splice(state.columns.indexOf(column), 1);
      node.remove();
      state.columns.forEach(function (c, i) { c.label.textContent = "message " + (i + 1); });
      markChanges();
    });
    state.columns.push(column);
    $("columns").appendChild(node);
    return column;
  }

  function run() {
    if (state.running) return;
    var todo = state.columns.filter(function (c) { return c.area.value.trim() !== ""; });
    state.columns.forEach(function (c) { c.answer = null; c.node.classList.remove("changed"); });
    if (!todo.length) { $("status").textContent = "type a message first"; return; }
    state.running = true;
    $("status").textContent = "asking the service ...";
    var started = performance.now();
    var heads = fetchHeads().catch(function (e) { return e; });
    var jobs = todo.map(function (c) {
      var text = c.area.value;
      c.result.textContent = "";
      c.result.appendChild(el("p", { "class": "muted", text: "..." }));
      var predicted = call("POST", "v1/predict", { text: text }).catch(function (e) { return e; });
      var explained = call("POST", "v1/explain", { text: text }).catch(function (e) { return e; });
      return Promise.all([predicted, explained, heads]).then(function (got) {
        render(c, text, got[0], got[1], got[2]);
      });
    });
    Promise.all(jobs).then(function () {
      markChanges();
      $("status").textContent = "answered in " + Math.round(performance.now() - started) + " ms";
    }).catch(function (e) {
      $("status").textContent = "the page failed: " + e;
    }).then(function () { state.running = false; });
  }

  function answerOf(p) {
    return p.out_of_scope ? "out of scope" : p.intents.map(function (i) { return i.intent; }).join(" + ");
  }

  function markChanges() {
    var first = null;
    state.columns.forEach(function (c) {
      c.node.classList.remove("changed");
      var badge = c.node.querySelector(".answer .badge");
      if (badge) badge.remove();
      if (c.answer === null) return;
      if (first === null) { first = c.answer; return; }
      if (c.answer !== first) {
        c.node.classList.add("changed");
        var a = c.node.querySelector(".answer");
        if (a) a.appendChild(el("span", { "class": "badge", text: "differs from the first" }));
      }
    });
  }

  // --- one message's answer --------------------------------------------------------------
  function render(c, text, predicted, explained, heads) {
    var out = c.result;
    out.textContent = "";
    if (heads instanceof ApiError && !(predicted instanceof ApiError && predicted.status === heads.status))
      out.appendChild(errorBox("head roles", heads));  // a refused key is said once, below
    var prediction = null;
    if (predicted instanceof ApiError) out.appendChild(errorBox("/v1/predict", predicted));
    else prediction = predicted.predictions[0];
    if (!prediction && !(explained instanceof ApiError)) prediction = explained.prediction;
    if (prediction) {
      c.answer = answerOf(prediction);
      out.appendChild(renderPrediction(prediction));
    }
    if (explained instanceof ApiError) {
      if (!(predicted instanceof ApiError) || explained.status !== predicted.status)
        out.appendChild(explained.status === 409
          ? el("p", { "class": "note", text: "no explanation: " + explained.message })
          : errorBox("/v1/explain", explained));
      return;
    }
    out.appendChild(renderTokens(text, explained));
    out.appendChild(renderAttention(explained, heads instanceof ApiError ? null : heads));
  }

  function renderPrediction(p) {
    var box = el("div", { "class": "prediction" });
    box.appendChild(el("div", { "class": "answer" + (p.out_of_scope ? " oos" : ""), "data-answer": answerOf(p),
                                text: answerOf(p) || "(no intent)" }));
    var d = p.decision;
    if (d) {
      var bar = el("div", { "class": "bar" }, [el("span"), el("i")]);
      var top = Math.max(1, d.value, d.threshold);
      var lo = Math.min(0, d.value, d.threshold);
      bar.firstChild.style.width = (100 * (d.value - lo) / (top - lo)) + "%";
      bar.lastChild.style.left = (100 * (d.threshold - lo) / (top - lo)) + "%";
      box.appendChild(el("div", { "class": "decision small", "data-oos": String(p.out_of_scope) }, [
        el("span", { text: (p.out_of_scope ? "out of scope: " : "in scope: ") + d.score + " " + num(d.value) +
                     (d.value < d.threshold ? " < " : " ≥ ") + "threshold " + num(d.threshold) }), bar]));
    } else {
      box.appendChild(el("div", { "class": "decision small muted", text: "no out-of-scope rule applied" }));
    }
    if (p.long_text) {
      box.appendChild(el("p", { "class": "note small", text: "long text: " + p.long_text.policy + " (" +
        p.long_text.tokens + " tokens, the model reads " + p.long_text.max_length + ")" }));
    }
    var answered = {};
    p.intents.forEach(function (i) { answered[i.intent] = true; });
    var rows = p.top_k.map(function (i) {
      var bar = el("div", { "class": "bar" }, [el("span")]);
      bar.firstChild.style.width = (100 * i.confidence) + "%";
      return el("tr", { "class": answered[i.intent] ? "answered" : "", "data-intent": i.intent,
                        "data-confidence": String(i.confidence) },
                [el("td", { text: i.intent }), el("td", { "class": "num", text: pct(i.confidence) }), el("td", {}, [bar])]);
    });
    box.appendChild(el("h3", { text: "intents (calibrated confidence)" }));
    box.appendChild(el("table", { "class": "intents" }, [
      el("tr", {}, [el("th", { text: "intent" }), el("th", { "class": "num", text: "confidence" }), el("th")])].concat(rows)));
    box.appendChild(el("h3", { text: "slots" }));
    if (!p.slots.length) {
      box.appendChild(el("p", { "class": "muted small slots-none", text: "none" }));
    } else {
      box.appendChild(el("table", { "class": "slots" }, [
        el("tr", {}, [el("th", { text: "slot" }), el("th", { text: "text" }), el("th", { text: "value" })])
      ].concat(p.slots.map(function (s) {
        var value = s.value === null ? "(does not parse)" : (typeof s.value === "object" ? JSON.stringify(s.value) : String(s.value));
        return el("tr", { "data-slot": s.name, "data-value": JSON.stringify(s.value) },
                  [el("td", { text: s.name }), el("td", { text: s.text }), el("td", {}, [el("pre", { "class": "value", text: value })])]);
      }))));
    }
    return box;
  }

  function realIndex(tokens) {
    var idx = [];
    tokens.forEach(function (t, i) { if (!t.special) idx.push(i); });
    return idx.length ? idx : tokens.map(function (t, i) { return i; });
  }

  function renderTokens(text, ex) {
    var box = el("div", { "class": "explanation" });
    var tokens = ex.tokens || [];
    var hasAttr = tokens.some(function (t) { return typeof t.attribution === "number"; });
    var rollout = ex.rollout && ex.rollout.cls;
    var by = hasAttr ? "attribution" : (rollout ? "rollout" : "none");
    box.appendChild(el("h3", { text: hasAttr ? "tokens by attribution" : "tokens by attention rollout" }));
    var scores = tokens.map(function (t, i) {
      if (by === "attribution") return typeof t.attribution === "number" ? t.attribution : null;
      if (by === "rollout" && !t.special) return rollout[i];
      return null;
    });
    var scale = 0;
    scores.forEach(function (s) { if (s !== null) scale = Math.max(scale, Math.abs(s)); });
    var line = el("div", { "class": "tokens", "data-by": by });
    tokens.forEach(function (t, i) {
      var shown = t.start !== null && t.end !== null && t.start !== undefined ? text.slice(t.start, t.end) : t.token;
      var span = el("span", { "class": "tok" + (t.special ? " special" : ""), "data-token": t.token, text: shown });
      var s = scores[i];
      if (s !== null) {
        var alpha = scale > 0 ? Math.abs(s) / scale : 0;
        var rgb = by === "rollout" ? "130, 80, 223" : (s >= 0 ? "207, 34, 46" : "9, 105, 218");
        span.style.backgroundColor = "rgba(" + rgb + ", " + (0.85 * alpha).toFixed(3) + ")";
        span.setAttribute("data-" + by, String(s));
        span.title = by + " " + (s >= 0 ? "+" : "") + s.toFixed(4);
      }
      line.appendChild(span);
    });
    box.appendChild(line);
    if (ex.window) {  // a long message: the window whose answer was kept is what is explained
      var w = ex.window, lt = ex.prediction && ex.prediction.long_text;
      var which = lt && lt.span ? "tokens " + (lt.span[0] + 1) + "–" + lt.span[1] + " read again (located by window " +
          lt.chunk + " of " + lt.chunks + "), whose answer was kept"
        : lt && lt.chunk ? "window " + lt.chunk + " of " + lt.chunks + ", whose answer was kept"
        : (lt && lt.policy === "head_tail" ? "its head and tail" : "the first window");
      box.appendChild(el("p", { "class": "note small window", "data-start": String(w.start), "data-end": String(w.end),
        text: "long message: explained " + which + ", characters " + w.start + "–" + w.end +
              (w.skipped ? " but " + w.skipped.start + "–" + w.skipped.end : "") + " of " + text.length }));
    }
    if (!hasAttr) {
      box.appendChild(el("p", { "class": "muted small no-attribution",
        text: "this service's explanation carries no attribution: the tokens are shaded by attention rollout from the first token, which is not a faithful explanation on its own" }));
    }
    if (ex.completeness !== undefined && ex.completeness !== null) {
      var c = ex.completeness;
      var parts = typeof c === "object"
        ? Object.keys(c).map(function (k) { return k + " " + (typeof c[k] === "number" ? num(c[k]) : String(c[k])); }).join(", ")
        : num(c);
      box.appendChild(el("p", { "class": "small completeness", text: "completeness: " + parts }));
    }
    return box;
  }

  // --- the attention of every layer and head --------------------------------------------
  function heatmap(matrix, cell) {
    var n = matrix.length, m = n ? matrix[0].length : 0;
    var canvas = el("canvas", { width: String(Math.max(1, m * cell)), height: String(Math.max(1, n * cell)) });
    var g = canvas.getContext("2d");
    for (var q = 0; q < n; q++) {
      var row = matrix[q], top = 0;
      for (var k = 0; k < m; k++) top = Math.max(top, row[k]);
      for (k = 0; k < m; k++) {
        var v = top > 0 ? row[k] / top : 0;
        var shade = Math.round(255 * (1 - v));
        g.fillStyle = "rgb(" + shade + "," + shade + ",255)";
        g.fillRect(k * cell, q * cell, cell, cell);
      }
    }
    return canvas;
  }

  function rolesOf(heads, layer, head) {
    var r = heads && heads.roles;
    return r && r[layer] && r[layer][head] ? r[layer][head] : [];
  }

  function renderAttention(ex, heads) {
    var box = el("div", { "class": "attention" });
    if (!ex.attention) {
      box.appendChild(el("p", { "class": "muted small", text: "this model has no attention heads to show" }));
      return box;
    }
    var tokens = ex.tokens, real = realIndex(tokens);
    box.appendChild(el("h3", { text: "attention: " + ex.num_layers + " layers × " + ex.num_heads + " heads" }));
    var select = el("select", { "class": "layer" });
    for (var l = 0; l < ex.num_layers; l++) select.appendChild(el("option", { value: String(l), text: "layer " + (l + 1) }));
    var grid = el("div", { "class": "heads" });
    var zoom = el("div", { "class": "zoom" });
    box.appendChild(el("div", { "class": "controls small" }, [select,
      el("span", { "class": "muted", text: "each head: its query × key weights, each row scaled to its largest; click one to enlarge" })]));
    box.appendChild(grid);
    box.appendChild(zoom);
    var cell = Math.max(2, Math.min(6, Math.floor(72 / Math.max(1, tokens.length))));

    function focus(layer, head) {
      zoom.textContent = "";
      var matrix = ex.attention[layer][head];
      var big = Math.max(8, Math.min(22, Math.floor(340 / Math.max(1, tokens.length))));
      var canvas = heatmap(matrix, big);
      var names = tokens.map(function (t) { return t.token; });
      var caption = "layer " + (layer + 1) + ", head " + (head + 1) + " - rows: queries, columns: keys: " + names.join(" ");
      var roles = rolesOf(heads, layer, head);
      zoom.appendChild(el("p", { "class": "small", text: caption }));
      roles.forEach(function (r) { zoom.appendChild(el("p", { "class": "small muted", text: r.role + ": " + r.evidence })); });
      zoom.appendChild(canvas);
    }

    function draw(layer) {
      grid.textContent = "";
      zoom.textContent = "";
      for (var h = 0; h < ex.num_heads; h++) {
        var matrix = ex.attention[layer][h];
        var mass = tokens.map(function () { return 0; });
        real.forEach(function (q) { matrix[q].forEach(function (w, k) { mass[k] += w; }); });
        var best = 0;
        mass.forEach(function (w, k) { if (w > mass[best]) best = k; });
        var roles = rolesOf(heads, layer, h);
        var node = el("div", { "class": "head", "data-layer": String(layer), "data-head": String(h),
                               title: "attends most to " + tokens[best].token }, [
          el("div", { text: "H" + (h + 1) }), heatmap(matrix, cell),
          el("div", { "class": "muted", text: "→ " + tokens[best].token })
        ].concat(roles.map(function (r) {
          return el("span", { "class": "role " + (r.source || ""), title: r.evidence, text: r.role });
        })));
        (function (head, n) {
          n.addEventListener("click", function () {
            grid.querySelectorAll(".head.sel").forEach(function (x) { x.classList.remove("sel"); });
            n.classList.add("sel");
            focus(layer, head);
          });
        })(h, node);
        grid.appendChild(node);
      }
    }
    select.addEventListener("change", function () { draw(Number(select.value)); });
    draw(0);
    return box;
  }

  // --- start -------------------------------------------------------------------------------
  function start() {
    loadKey();
    $("key-form").addEventListener("submit", function (ev) {
      ev.preventDefault();
      setKey($("key").value);
      $("status").textContent = "";
      fetchHeads().then(function () { $("status").textContent = "key accepted"; }, function (e) {
        $("status").textContent = e instanceof ApiError ? e.status + " " + e.type + ": " + e.message : String(e);
      });
    });
    $("add").addEventListener("click", function () { addColumn("").area.focus(); });
    $("run").addEventListener("click", run);
    addColumn("");
    fetchHeads().catch(function (e) {
      if (e instanceof ApiError && e.status === 401) $("status").textContent = "this service needs an API key: type it above";
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

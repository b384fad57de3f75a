(function () {
  "use strict";
  // The study's data is a JSON block of the page; every value from it enters the DOM as text.
  var data = JSON.parse(document.getElementById("study-data").textContent);
  var storeKey = "bvb-human:" + data.pack_id;
  var state = restore();
  var served = location.protocol === "http:" || location.protocol === "https:";
  var itemsBox = document.getElementById("items");
  var rater = document.getElementById("rater");
  var status = document.getElementById("status");
  var videos = [];

  function restore() {
    try {
      var saved = JSON.parse(localStorage.getItem(storeKey) || "null");
      if (saved && typeof saved === "object" && saved.answers) { return saved; }
    } catch (e) { /* storage off (a private window, a strict file: policy): answers live in the page only */ }
    return { rater_id: "", answers: {} };
  }

  function persist() {
    try { localStorage.setItem(storeKey, JSON.stringify(state)); } catch (e) { /* see restore */ }
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) { node.setAttribute(name, attrs[name]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function clip(src, label, extra) {
    var figure = el("figure", extra || {});
    var v = el("video", { controls: "", loop: "", muted: "", playsinline: "", preload: "auto" });
    v.muted = true;
    v.src = src;
    v.addEventListener("loadeddata", countVideos);
    v.addEventListener("error", countVideos);
    videos.push(v);
    figure.appendChild(v);
    figure.appendChild(el("figcaption", {}, label));
    return figure;
  }

  function countVideos() {
    var ok = videos.filter(function (v) { return v.readyState >= 2 && v.videoWidth > 0; }).length;
    document.body.setAttribute("data-videos-loaded", ok + "/" + videos.length);
  }

  // --- BVB: rank the candidates of a scene -------------------------------------------------
  function rankAnswer(item) {
    var ranks = (state.answers[item.scene_id] || {}).ranks || {};
    var k = item.candidates.length;
    var order = item.candidates.map(function (c) { return c.code; });
    var values = order.map(function (code) { return Number(ranks[code] || 0); });
    var complete = values.every(function (r) { return r >= 1 && r <= k; }) &&
      values.filter(function (r, i) { return values.indexOf(r) === i; }).length === k;
    if (!complete) { return null; }
    return order.slice().sort(function (a, b) { return ranks[a] - ranks[b]; });
  }

  function buildRank(item, index) {
    var box = el("section", { "class": "item", "data-item": item.scene_id });
    var k = item.candidates.length;
    box.appendChild(el("h2", {}, "Scene " + (index + 1) + " of " + data.items.length));
    var media = el("div", { "class": "media" });
    media.appendChild(clip(item.reference, "Source clip", { "class": "reference" }));
    var check = el("p", { "class": "check" });
    item.candidates.forEach(function (candidate) {
      var figure = clip(candidate.video, "Reconstruction " + candidate.code + " ");
      var select = el("select", { "data-code": candidate.code, "aria-label": "rank of " + candidate.code });
      select.appendChild(el("option", { value: "" }, "rank"));
      for (var r = 1; r <= k; r++) { select.appendChild(el("option", { value: String(r) }, String(r))); }
      var saved = ((state.answers[item.scene_id] || {}).ranks || {})[candidate.code];
      if (saved) { select.value = String(saved); }
      select.addEventListener("change", function () {
        var entry = state.answers[item.scene_id] || { ranks: {} };
        if (select.value) { entry.ranks[candidate.code] = Number(select.value); } else { delete entry.ranks[candidate.code]; }
        state.answers[item.scene_id] = entry;
        update();
      });
      figure.querySelector("figcaption").appendChild(select);
      media.appendChild(figure);
    });
    box.appendChild(media);
    var together = el("button", { type: "button", "class": "play-all" }, "Play all from the start");
    together.addEventListener("click", function () {
      media.querySelectorAll("video").forEach(function (v) {
        v.currentTime = 0;
        var playing = v.play();
        if (playing) { playing.catch(function () { /* a browser that refuses: the clip keeps its own play button */ }); }
      });
    });
    box.appendChild(together);
    box.appendChild(el("p", { "class": "note" }, "1 is the most like the source clip; give each rank once."));
    box.appendChild(check);
    box._answered = function () {
      var ranks = (state.answers[item.scene_id] || {}).ranks || {};
      var given = Object.keys(ranks).map(function (c) { return ranks[c]; });
      var twice = given.filter(function (r, i) { return given.indexOf(r) !== i; });
      check.textContent = twice.length ? "Rank " + twice[0] + " is given twice." : "";
      return rankAnswer(item) !== null;
    };
    return box;
  }

  // --- VGI: rate one generated video --------------------------------------------------------
  function buildRate(item, index) {
    var task = data.instances[item.instance];
    var box = el("section", { "class": "item", "data-item": item.code });
    box.appendChild(el("h2", {}, "Video " + (index + 1) + " of " + data.items.length + " (" + item.code + ")"));
    var media = el("div", { "class": "media" });
    if (task.image) {
      var still = el("figure", { "class": "reference" });
      var img = el("img", { alt: "start image" });
      img.src = task.image;
      still.appendChild(img);
      still.appendChild(el("figcaption", {}, "Start image"));
      media.appendChild(still);
    }
    media.appendChild(clip(item.video, "Generated video"));
    box.appendChild(media);
    box.appendChild(el("p", {}, "Task: " + task.constraint));
    if (task.criteria.length) {
      box.appendChild(el("p", {}, "Complete when:"));
      var criteria = el("ul", { "class": "criteria" });
      task.criteria.forEach(function (c) { criteria.appendChild(el("li", {}, c)); });
      box.appendChild(criteria);
    }
    var entry = state.answers[item.code] || { completeness: null, violations: {} };
    state.answers[item.code] = entry;
    var verdict = el("p", { "class": "completeness" }, "The video ");
    ["complete", "partial", "failed"].forEach(function (value) {
      var label = el("label", {});
      var radio = el("input", { type: "radio", name: "completeness-" + item.code, value: value });
      radio.checked = entry.completeness === value;
      radio.addEventListener("change", function () { entry.completeness = value; update(); });
      label.appendChild(radio);
      label.appendChild(document.createTextNode(" " + value + " "));
      verdict.appendChild(label);
    });
    box.appendChild(verdict);
    box.appendChild(el("p", {}, "Times the video breaks each rule:"));
    var rules = el("ol", { "class": "rules" });
    task.rules.forEach(function (rule) {
      var li = el("li", {});
      var input = el("input", { type: "number", min: "0", step: "1", "data-rule": rule.id, "aria-label": "violations of " + rule.id });
      input.value = String(entry.violations[rule.id] || 0);
      input.addEventListener("input", function () {
        var n = Math.floor(Number(input.value));
        entry.violations[rule.id] = isFinite(n) && n > 0 ? n : 0;
        update();
      });
      li.appendChild(input);
      li.appendChild(document.createTextNode(" " + rule.rule));
      rules.appendChild(li);
    });
    box.appendChild(rules);
    box._answered = function () { return entry.completeness !== null; };
    return box;
  }

  // --- answers ------------------------------------------------------------------------------
  function payload() {
    var out = {
      instrument_id: data.instrument_id, kind: data.kind, pack_id: data.pack_id,
      rater_id: state.rater_id, saved_at: new Date().toISOString()
    };
    if (data.kind === "bvb") {
      out.rankings = data.items.filter(function (item) { return rankAnswer(item) !== null; }).map(function (item) {
        return { scene_id: item.scene_id, source: item.source, rank: rankAnswer(item) };
      });
    } else {
      out.ratings = data.items.filter(function (item) { return state.answers[item.code].completeness; }).map(function (item) {
        var entry = state.answers[item.code];
        var violations = {};
        data.instances[item.instance].rules.forEach(function (rule) { violations[rule.id] = entry.violations[rule.id] || 0; });
        return { item: item.code, completeness: entry.completeness, violations: violations };
      });
    }
    out.complete = (out.rankings || out.ratings).length === data.items.length;
    return out;
  }

  var boxes = data.items.map(function (item, index) {
    var box = data.kind === "bvb" ? buildRank(item, index) : buildRate(item, index);
    itemsBox.appendChild(box);
    return box;
  });

  function update() {
    persist();
    var answered = boxes.filter(function (box) {
      var done = box._answered();
      box.classList.toggle("answered", done);
      return done;
    }).length;
    document.getElementById("progress").textContent = answered + " of " + boxes.length + " answered";
    document.body.setAttribute("data-answered", answered + "/" + boxes.length);
  }

  function ready() {
    state.rater_id = rater.value.trim();
    persist();
    if (!state.rater_id) { status.textContent = "Enter your rater id first."; rater.focus(); return false; }
    return true;
  }

  rater.value = state.rater_id || "";
  rater.addEventListener("input", function () { state.rater_id = rater.value.trim(); persist(); });

  document.getElementById("save").addEventListener("click", function () {
    if (!ready()) { return; }
    var body = JSON.stringify(payload(), null, 2);
    var link = el("a", { download: "answers-" + data.pack_id + "-" + state.rater_id.replace(/[^A-Za-z0-9._-]/g, "_") + ".json" });
    link.href = URL.createObjectURL(new Blob([body], { type: "application/json" }));
    document.body.appendChild(link);
    link.click();
    link.remove();
    status.textContent = "Saved. Send the downloaded file to the study's organiser.";
    document.body.setAttribute("data-saved", "download");
  });

  var submit = document.getElementById("submit");
  submit.hidden = !served;
  submit.addEventListener("click", function () {
    if (!ready()) { return; }
    status.textContent = "Sending...";
    fetch("answers", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(payload()) })
      .then(function (response) { return response.json().then(function (body) { return { ok: response.ok, body: body }; }); })
      .then(function (result) {
        status.textContent = result.ok ? "Sent: the study server keeps your answers as " + result.body.saved
          : "Not sent: " + result.body.error;
        document.body.setAttribute("data-saved", result.ok ? "server" : "refused");
      })
      .catch(function (error) {
        status.textContent = "Not sent (" + error + "); save them as a file instead.";
        document.body.setAttribute("data-saved", "failed");
      });
  });

  update();
  countVideos();
}());

// corpus_pipeline web page: fetches server-rendered fragments (and two JSON lists) with the
// API key as a Bearer header; the key is kept in this tab's sessionStorage only.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const KEY = "corpus_api_key";
  let pending = null; // what to load again once a key is given

  function headers() {
    const key = sessionStorage.getItem(KEY);
    return key ? { Authorization: "Bearer " + key } : {};
  }

  function status(text, isError) {
    $("status").textContent = text || "";
    $("status").className = isError ? "error" : "";
  }

  async function get(url, retry) {
    const r = await fetch(url, { headers: headers() });
    if (r.status === 401 || r.status === 403) {
      pending = retry;
      $("key-form").hidden = false;
      $("key-why").textContent = r.status === 403
        ? "That key was refused: enter one of CORPUS_API_KEYS."
        : "This server needs an API key (one of CORPUS_API_KEYS).";
      $("key").focus();
      throw new Error("an API key is needed");
    }
    if (!r.ok) {
      let msg = r.status + " " + r.statusText;
      try { const j = await r.json(); msg = (j.error && j.error.message) || msg; } catch (e) { /* not JSON */ }
      throw new Error(msg);
    }
    return r;
  }

  function params() { return new URLSearchParams(location.search); }

  function option(value, label) {
    const o = document.createElement("option");
    o.value = value; o.textContent = label;
    return o;
  }

  async function loadKbs() {
    const kbs = await (await get("/kbs", loadKbs)).json();
    const sel = $("kb");
    sel.replaceChildren(...kbs.map((k) => option(k.kb, k.kb + (k.active_version ? "" : " (not indexed)"))));
    const want = params().get("kb");
    if (want && kbs.some((k) => k.kb === want)) sel.value = want;
    await loadVersions();
  }

  async function loadVersions() {
    const kb = $("kb").value;
    const sel = $("version");
    if (!kb) { sel.replaceChildren(); return; }
    const versions = await (await get("/kbs/" + encodeURIComponent(kb) + "/versions", loadVersions)).json();
    sel.replaceChildren(...versions.filter((v) => v.built).map((v) =>
      option(v.strategy_version, v.strategy_version + (v.active ? " (active)" : "") + (v.plan ? " · " + v.plan : ""))));
    const want = params().get("version");
    const active = versions.find((v) => v.active);
    if (want && versions.some((v) => v.strategy_version === want)) sel.value = want;
    else if (active) sel.value = active.strategy_version;
  }

  async function loadImages(root) {
    for (const img of root.querySelectorAll("img[data-src]")) {
      const src = img.dataset.src;
      img.removeAttribute("data-src");
      try {
        const blob = await (await get(src, null)).blob();
        img.src = URL.createObjectURL(blob);
      } catch (e) { img.alt = "image not loaded: " + e.message; }
    }
  }

  async function fragment(url, label) {
    status(label + "…");
    const view = $("view");
    view.setAttribute("aria-busy", "true");
    try {
      const html = await (await get(url, render)).text();
      view.innerHTML = html; // rendered and escaped on the server (Jinja2 autoescape)
      status("");
      await loadImages(view);
      if (location.hash) { const el = document.getElementById(location.hash.slice(1)); if (el) el.scrollIntoView(); }
    } catch (e) {
      status(e.message, true);
    } finally {
      view.removeAttribute("aria-busy");
    }
  }

  function current(view) {
    for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("current", a.dataset.nav === view);
  }

  async function render() {
    const p = params();
    const view = p.get("view") || (p.get("q") ? "search" : "docs");
    const kb = $("kb").value, version = $("version").value;
    current(view);
    if (!kb) return;
    const q = new URLSearchParams({ kb });
    if (view === "search") {
      const text = p.get("q");
      if (!text) { $("view").innerHTML = ""; status("Type a question and press Search."); return; }
      $("q").value = text;
      q.set("q", text);
      if (version) q.set("version", version);
      if (p.get("top_k")) { q.set("top_k", p.get("top_k")); $("top-k").value = p.get("top_k"); }
      return fragment("/ui/fragments/search?" + q, "Searching");
    }
    if (view === "doc") {
      q.set("doc", p.get("doc") || "");
      q.set("version", p.get("version") || version);
      return fragment("/ui/fragments/document?" + q, "Loading the document");
    }
    if (view === "compare") {
      q.set("doc", p.get("doc") || "");
      for (const k of ["a", "b"]) if (p.get(k)) q.set(k, p.get(k));
      return fragment("/ui/fragments/compare?" + q, "Comparing");
    }
    if (version) q.set("version", version);
    return fragment("/ui/fragments/documents?" + q, "Loading the documents");
  }

  function go(query, hash) {
    history.pushState(null, "", "/?" + query + (hash || ""));
    return render();
  }

  function state(extra) {
    const q = new URLSearchParams({ kb: $("kb").value, version: $("version").value });
    for (const [k, v] of Object.entries(extra)) q.set(k, v);
    return q;
  }

  document.addEventListener("DOMContentLoaded", () => {
    if (sessionStorage.getItem(KEY)) $("forget-key").hidden = false;
    $("key-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(KEY, $("key").value.trim());
      $("key").value = "";
      $("key-form").hidden = true;
      $("forget-key").hidden = false;
      status("");
      const again = pending || loadKbs;
      pending = null;
      (again === loadKbs || again === loadVersions ? loadKbs().then(render) : again()).catch((e) => status(e.message, true));
    });
    $("forget-key").addEventListener("click", () => { sessionStorage.removeItem(KEY); location.reload(); });
    $("search-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const text = $("q").value.trim();
      if (text) go(state({ view: "search", q: text, top_k: $("top-k").value }));
    });
    $("kb").addEventListener("change", () => loadVersions().then(() => go(state({ view: "docs" }))).catch((e) => status(e.message, true)));
    $("version").addEventListener("change", () => {
      const p = params();
      const view = p.get("view") === "search" && p.get("q") ? { view: "search", q: p.get("q") } : { view: "docs" };
      go(state(view));
    });
    document.addEventListener("click", (ev) => {
      const a = ev.target.closest("a[data-nav]");
      if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
      ev.preventDefault();
      const url = new URL(a.href, location.href);
      const q = url.searchParams;
      if (!q.get("kb")) { q.set("kb", $("kb").value); if ($("version").value) q.set("version", $("version").value); }
      if (q.get("version") && q.get("version") !== $("version").value) $("version").value = q.get("version");
      go(q.toString(), url.hash);
    });
    document.addEventListener("submit", (ev) => {
      const f = ev.target.closest("form.compare-pick");
      if (!f) return;
      ev.preventDefault();
      const d = new FormData(f);
      go(new URLSearchParams({ view: "compare", kb: $("kb").value, doc: d.get("doc"), a: d.get("a"), b: d.get("b") }).toString());
    });
    window.addEventListener("popstate", () => render());
    loadKbs().then(render).catch((e) => status(e.message, true));
  });
})();

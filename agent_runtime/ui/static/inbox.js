// Gatehouse inbox: decisions, countdowns, keyboard, live updates. Plain JavaScript, no framework, no inline code
// (the Content-Security-Policy allows this origin's scripts only). The CSRF token comes from the page's <meta>;
// nothing else secret is ever in the page.
(() => {
  "use strict";
  const csrf = document.querySelector('meta[name="csrf-token"]')?.content || "";
  const statusBox = document.getElementById("status");
  const banner = document.getElementById("connection");

  function say(text, ok) {
    if (!statusBox) return;
    const p = document.createElement("p");
    p.className = ok ? "ok" : "err";
    p.textContent = text;
    statusBox.replaceChildren(p);
  }

  const ENDED = "Your session has ended (signed out, here or in another tab, or expired): sign in again. Nothing was sent.";

  async function post(url, body) {
    const reply = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "content-type": "application/json", "x-csrf-token": csrf },
      body: JSON.stringify(body),
    });
    if (reply.status === 401) { sessionEnded(); throw new Error(ENDED); }
    let data = {};
    try { data = await reply.json(); } catch (_) { /* not JSON */ }
    if (!reply.ok) throw new Error(data.error || `${reply.status} ${reply.statusText}`);
    return data;
  }

  function newId() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  // One A2A JSON-RPC call from the browser, authenticated by the session cookie and the CSRF token. With
  // onEvent, SendStreamingMessage: every server-sent event's JSON-RPC result is handed to onEvent as it arrives.
  async function a2a(message, onEvent) {
    const method = onEvent ? "SendStreamingMessage" : "SendMessage";
    return rpc(method, { message: { messageId: newId(), role: "ROLE_USER", ...message } }, onEvent);
  }

  async function rpc(method, params, onEvent) {
    const reply = await fetch("/", {
      method: "POST", credentials: "same-origin",
      headers: { "content-type": "application/json", "x-csrf-token": csrf, "a2a-version": "1.0",
                 "accept": onEvent ? "text/event-stream" : "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: newId(), method, params }),
    });
    if (reply.status === 401) { sessionEnded(); throw new Error(ENDED); }
    if (!reply.ok) {
      let error = `${reply.status} ${reply.statusText}`;
      try { error = (await reply.json()).error || error; } catch (_) { /* keep the status */ }
      throw new Error(error);
    }
    if (!onEvent) {
      const data = await reply.json();
      if (data.error) throw new Error(data.error.message || JSON.stringify(data.error));
      return data.result;
    }
    const reader = reply.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0 || (cut = buffer.indexOf("\r\n\r\n")) >= 0) {
        const chunk = buffer.slice(0, cut);
        buffer = buffer.slice(cut + (buffer.startsWith("\r\n\r\n", cut) ? 4 : 2));
        const data = chunk.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
        if (!data) continue;
        const parsed = JSON.parse(data);
        if (parsed.error) throw new Error(parsed.error.message || JSON.stringify(parsed.error));
        onEvent(parsed.result || {});
      }
    }
    return null;
  }

  window.Gatehouse = { csrf, say, post, a2a, rpc, newId };

  // --- countdowns ---------------------------------------------------------------------------------
  function fmt(seconds) {
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    return h ? `${h}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
  }
  function tick() {
    const now = Date.now();
    for (const el of document.querySelectorAll("[data-expires]")) {
      const left = Math.floor((Date.parse(el.dataset.expires) - now) / 1000);
      el.textContent = left <= 0 ? "expired" : `expires in ${fmt(left)}`;
      el.classList.toggle("expired", left <= 0);
    }
  }
  setInterval(tick, 1000);
  tick();

  // --- the list -----------------------------------------------------------------------------------
  const items = document.getElementById("items");
  const live = items?.dataset.live;

  function selectedKeys() {
    return [...document.querySelectorAll("#items .select:checked")].map((box) => box.value);
  }

  // What the person is doing survives a swap of the list (or of a detail page's <main>): every open form (a denial,
  // an edit) with what was typed in it, its focus and caret, and an edit's error line. An edit whose request changed
  // meanwhile (another approver edited it: its arguments hash differs) is not put back over the new arguments.
  function keepWork(root) {
    const forms = [];
    for (const form of root.querySelectorAll(".card form:not([hidden])")) {
      const values = new Map();
      let focused = null, at = 0;
      for (const el of form.querySelectorAll("textarea, input")) {
        const id = el.dataset.arg ?? el.name;
        values.set(id, el.value);
        if (el === document.activeElement) { focused = id; at = el.selectionStart; }
      }
      const error = form.querySelector(".form-error");
      forms.push({ key: form.closest(".card").dataset.key, kind: form.classList.contains("edit-form") ? "edit-form" : "deny-form",
                   hash: form.dataset.argsHash, values, focused, at, error: error && !error.hidden ? error.textContent : "" });
    }
    return forms;
  }

  function restoreWork(root, forms) {
    let typing = false;
    for (const was of forms) {
      const form = root.querySelector(`.card[data-key="${CSS.escape(was.key)}"] .${was.kind}`);
      if (!form) continue;  // decided meanwhile: nothing left to deny or edit
      form.hidden = false;
      if (was.kind === "edit-form" && form.dataset.argsHash !== was.hash) {
        showError(form, "This request changed while you were editing it (it was edited): the form now shows its " +
                        "arguments as they are. Nothing was decided.");
        continue;
      }
      for (const el of form.querySelectorAll("textarea, input")) {
        const id = el.dataset.arg ?? el.name;
        if (was.values.has(id)) el.value = was.values.get(id);
        if (id === was.focused) {
          el.focus();
          if (typeof was.at === "number") el.setSelectionRange(was.at, was.at);
          typing = true;
        }
      }
      if (was.error) showError(form, was.error);
    }
    return typing;
  }

  function showError(form, text) {
    const line = form.querySelector(".form-error");
    if (!line) return;
    line.textContent = text;
    line.hidden = !text;
  }

  // What the last decision from this page came to, per request, shown on its card; a card that has left the list
  // (decided) leaves its note where it stood: before the card that followed it then (``before``), else at the end.
  const notes = new Map();  // key -> { text, ok, before }

  // For each of ``keys``, the card that follows it now, not among ``keys``: taken when the person acts, since a live
  // update may take the decided cards away before the runtime's answer arrives.
  function followers(keys) {
    const cards = [...document.querySelectorAll("#items .card")].map((c) => c.dataset.key);
    return new Map(keys.map((key) => {
      const at = cards.indexOf(key);
      return [key, at >= 0 ? cards.slice(at + 1).find((k) => !keys.includes(k)) ?? null : null];
    }));
  }

  function noteOn(key, text, ok, before = null) {
    notes.set(key, { text, ok, before });
  }

  function placeNotes(root) {
    for (const old of root.querySelectorAll(".card-note")) old.remove();
    const cardOf = (key) => key && root.querySelector(`.card[data-key="${CSS.escape(key)}"]`);
    for (const [key, note] of notes) {
      const line = document.createElement("p");
      line.className = `card-note ${note.ok ? "ok" : "err"}`;
      line.setAttribute("role", "status");
      line.dataset.for = key;
      line.textContent = note.text;
      const card = cardOf(key);
      if (card) {
        (card.querySelector(".actions") || card.querySelector(".result") || card.lastElementChild).after(line);
        continue;
      }
      line.classList.add("gone");
      let next = note.before;  // the card that followed it; if that one left too, the one that followed that
      const seen = new Set();
      while (next && !cardOf(next) && notes.has(next) && !seen.has(next)) { seen.add(next); next = notes.get(next).before; }
      const anchor = cardOf(next);
      if (anchor) anchor.before(line);
      else root.append(line);
    }
  }

  function newNotes() { notes.clear(); }

  // The batch toolbar only where there is something to select; "Select all" ticked only while all are.
  function toolbar() {
    const batch = document.querySelector(".batch");
    if (!batch || !items) return;
    const boxes = [...items.querySelectorAll(".select")];
    batch.hidden = !boxes.length;
    const all = document.getElementById("select-all");
    if (all) all.checked = boxes.length > 0 && boxes.every((box) => box.checked);
  }

  let refreshing = null;
  async function refresh() {
    if (!live) { await rerender(); return; }
    if (refreshing) { refreshing.again = true; return; }
    refreshing = { again: false };
    try {
      do {
        refreshing.again = false;
        const reply = await fetch(live, { credentials: "same-origin" });
        if (reply.status === 401) { sessionEnded(); return; }
        if (!reply.ok) throw new Error(`${reply.status} ${reply.statusText}`);
        const html = await reply.text();  // rendered (and escaped) by the server's templates
        // Taken now, after the awaits, so that no keystroke is lost: the selection, the focused card, open forms.
        const keep = new Set(selectedKeys());
        const focused = document.activeElement?.closest?.(".card")?.dataset.key;
        const focusedAt = [...items.querySelectorAll(".card")].findIndex((c) => c.dataset.key === focused);
        const work = keepWork(items);
        items.innerHTML = html;
        for (const box of items.querySelectorAll(".select")) {
          box.checked = keep.has(box.value);
          box.closest(".card").classList.toggle("selected", box.checked);
        }
        const typing = restoreWork(items, work);
        placeNotes(items);
        toolbar();
        if (focused && !typing) {
          // The focused card left (decided): the focus goes to the card that took its place, not to the top.
          const cards = [...items.querySelectorAll(".card")];
          const same = cards.find((c) => c.dataset.key === focused);
          (same || cards[Math.min(focusedAt, cards.length - 1)])?.focus();
        }
        document.title = document.title.replace(/\(\d+\)/, `(${items.querySelectorAll(".card").length})`);
        tick();
      } while (refreshing.again);
    } catch (error) {
      say(`Could not refresh the list: ${error.message}`, false);
    } finally {
      refreshing = null;
    }
  }

  // A page without a live list (a request's detail page): its <main> rendered again by the server, swapped in. Not a
  // reload, which would wipe what the status line just said ("already approved by …", "1 of 2").
  async function rerender() {
    try {
      const reply = await fetch(location.href, { credentials: "same-origin" });
      if (!reply.ok) throw new Error(`${reply.status} ${reply.statusText}`);
      const fresh = new DOMParser().parseFromString(await reply.text(), "text/html").querySelector("main");
      const main = document.querySelector("main");
      if (fresh && main) {
        const work = keepWork(main);
        main.replaceChildren(...fresh.childNodes);
        restoreWork(main, work);
        placeNotes(main.querySelector("#items") || main);
        tick();
      }
    } catch (error) {
      say(`Could not refresh the page: ${error.message}`, false);
    }
  }

  async function withButtonsOff(run) {
    const buttons = [...document.querySelectorAll("button")];
    buttons.forEach((b) => { b.disabled = true; });
    try {
      await run();
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  // Returns whether the runtime answered (each request's outcome is then on its card and in the status line).
  async function decide(keys, decision, reason, session) {
    if (!keys.length) { say("Select one or more requests first.", false); return false; }
    let answered = false;
    const next = followers(keys);
    await withButtonsOff(async () => {
      try {
        const data = await post("/ui/api/decisions", { ids: keys, decision, reason, session });
        newNotes();
        for (const r of data.results) noteOn(r.id, r.message, r.ok, next.get(r.id));
        say(data.results.map((r) => r.message).join(" · "), data.results.every((r) => r.ok));
        answered = true;
      } catch (error) {
        newNotes();
        for (const key of keys) noteOn(key, error.message, false, next.get(key));
        say(error.message, false);
      }
    });
    placeNotes(items || document);
    await refresh();
    return answered;
  }

  // Edit and approve: only the fields the person changed are sent (the others keep their values on the server,
  // redacted ones included: this page never had them); strings as typed, the other fields read as JSON.
  function changedFields(form) {
    const changes = [];
    for (const el of form.querySelectorAll("[data-arg]")) {
      if (el.readOnly || el.value === el.defaultValue) continue;
      if (el.dataset.kind !== "json") { changes.push([el.dataset.arg, el.value]); continue; }
      try {
        changes.push([el.dataset.arg, JSON.parse(el.value)]);
      } catch (error) {
        el.focus();
        throw new Error(`${el.dataset.arg} is not valid JSON (${error.message}): nothing was sent.`);
      }
    }
    return Object.fromEntries(changes);
  }

  async function approveEdited(form) {
    const key = form.closest(".card").dataset.key;
    // The list may be swapped while the decision is on its way (a live update): the form is then its new copy.
    const current = () => document.querySelector(`.card[data-key="${CSS.escape(key)}"] .edit-form`) || form;
    let changes;
    try {
      changes = changedFields(form);
    } catch (error) {
      showError(form, error.message);
      return;
    }
    if (!Object.keys(changes).length) {
      showError(form, "Nothing is changed: change an argument, or use Approve to approve the call as it is.");
      return;
    }
    showError(form, "");
    const next = followers([key]);
    await withButtonsOff(async () => {
      try {
        const data = await post("/ui/api/decisions", { ids: [key], decision: "approve", reason: "", session: false,
                                                       arguments: changes, args_hash: form.dataset.argsHash });
        const result = data.results[0];
        newNotes();
        noteOn(key, result.message, result.ok, next.get(key));
        say(result.message, result.ok);
        const now = current();
        if (result.ok) now.hidden = true;  // done with it: the card shows the edit, or leaves
        else showError(now, result.message);  // refused: the form stays open, as typed, with why
      } catch (error) {
        say(error.message, false);
        showError(current(), error.message);
      }
    });
    await refresh();
  }

  function openEdit(form) {
    form.hidden = false;
    form.querySelector("[data-arg]:not([readonly])")?.focus();
  }

  async function answerQuestion(card, data) {
    const next = followers([card.dataset.key]).get(card.dataset.key);
    newNotes();
    try {
      await a2a({ taskId: card.dataset.task, contextId: card.dataset.context, parts: [{ data }] });
      noteOn(card.dataset.key, "Answer sent.", true, next);
      say("Answer sent.", true);
    } catch (error) {
      noteOn(card.dataset.key, `The answer was not taken: ${error.message}`, false, next);
      say(`The answer was not taken: ${error.message}`, false);
    }
    await refresh();
  }

  function openDeny(form) {
    form.hidden = false;
    form.querySelector("textarea")?.focus();
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-action]");
    if (!button) return;
    const card = button.closest(".card");
    const action = button.dataset.action;
    if (action === "approve") decide([card.dataset.key], "approve", "", false);
    else if (action === "approve-session") decide([card.dataset.key], "approve", "", true);
    else if (action === "deny") openDeny(card.querySelector(".deny-form"));
    else if (action === "edit") openEdit(card.querySelector(".edit-form"));
    else if (action === "cancel-edit") {
      const form = button.closest(".edit-form");
      form.reset();
      showError(form, "");
      form.hidden = true;
    }
    else if (action === "batch-approve") decide(selectedKeys(), "approve", "", false);
    else if (action === "batch-deny") {
      if (!selectedKeys().length) say("Select one or more requests first.", false);
      else openDeny(document.querySelector(".batch-deny-form"));
    } else if (action === "cancel-deny") button.closest(".deny-form").hidden = true;
    else if (action === "answer") answerQuestion(card, { decision_type: "answer", answers: { [card.dataset.question]: button.dataset.option } });
    else if (action === "confirm") answerQuestion(card, { decision_type: "confirm" });
    else if (action === "held-answer") {  // an agent CLI's AskUserQuestion: choose, then confirm (sent as a deny)
      const confirm = card.querySelector(".held-confirm");
      confirm.dataset.reason = button.dataset.reason;
      confirm.querySelector(".chosen").textContent = `Answer: ${button.textContent}`;
      confirm.hidden = false;
    } else if (action === "held-answer-send") decide([card.dataset.key], "deny", button.closest(".held-confirm").dataset.reason, false);
    else if (action === "question-cancel") answerQuestion(card, { decision_type: "cancel" });
    else if (action === "logout") post("/ui/logout", {}).catch(() => null).finally(() => { location.href = "/ui/login"; });
  });

  document.addEventListener("submit", (event) => {
    const edit = event.target.closest(".edit-form");
    if (edit) { event.preventDefault(); approveEdited(edit); return; }
    const form = event.target.closest(".deny-form");
    if (!form) return;
    event.preventDefault();
    const reason = form.querySelector("textarea").value.trim();
    if (!reason) { say("A denial needs a reason: the agent is told why its call did not run.", false); return; }
    const batch = form.classList.contains("batch-deny-form");
    const keys = batch ? selectedKeys() : [form.closest(".card").dataset.key];
    decide(keys, "deny", reason, false).then((answered) => {
      if (batch && answered) { form.reset(); form.hidden = true; }  // done: the next batch starts with an empty reason
    });
  });

  document.addEventListener("change", (event) => {
    if (event.target.id === "select-all") {
      for (const box of document.querySelectorAll("#items .select")) {
        box.checked = event.target.checked;
        box.closest(".card").classList.toggle("selected", box.checked);
      }
    } else if (event.target.classList.contains("select")) {
      event.target.closest(".card").classList.toggle("selected", event.target.checked);
    }
  });

  // --- keyboard: j/k move, a approve, d deny, e edit and approve, x select ------------------------------------------
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.target.matches("input, textarea, select")) return;
    const cards = [...document.querySelectorAll("#items .card")];
    if (!cards.length) return;
    const current = document.activeElement?.closest?.(".card");
    const at = cards.indexOf(current);
    const focus = (i) => { const c = cards[Math.max(0, Math.min(cards.length - 1, i))]; c.focus(); c.scrollIntoView({ block: "nearest" }); };
    if (event.key === "j") focus(at + 1);
    else if (event.key === "k") focus(at < 0 ? 0 : at - 1);
    else if (!current) return;
    else if (event.key === "a" && current.matches(".question") && !current.querySelector('[data-action="confirm"]')) {
      tell(current, "A question has no approve: choose one of its options (or Cancel).");
    }
    else if (event.key === "a") current.querySelector('[data-action="approve"], [data-action="confirm"]')?.click();
    else if (event.key === "d") { const form = current.querySelector(".deny-form"); if (form) { event.preventDefault(); openDeny(form); } }
    else if (event.key === "e") { const form = current.querySelector(".edit-form"); if (form) { event.preventDefault(); openEdit(form); } }
    else if (event.key === "x") {
      const box = current.querySelector(".select");
      if (box) box.click();
      else tell(current, "A question cannot be selected: it is answered on its own, with one of its options.");
    }
    else return;
  });
  // A key that does nothing on this card says why, on the card and in the status line.
  function tell(card, text) {
    newNotes();
    noteOn(card.dataset.key, text, false);
    placeNotes(items || document);
    say(text, false);
  }
  document.addEventListener("focusin", (event) => {
    for (const c of document.querySelectorAll(".card.focused")) c.classList.remove("focused");
    event.target.closest?.(".card")?.classList.add("focused");
  });

  // --- live updates -------------------------------------------------------------------------------
  // The session is gone (the runtime restarted with a new session key, or it expired): reconnecting cannot help.
  // The banner says so and links to the login page, which brings the person back here; nothing typed is lost.
  function sessionEnded() {
    const who = document.querySelector(".top .who");
    if (who) { who.textContent = "Signed out"; who.classList.add("ended"); }
    document.querySelector('[data-action="logout"]')?.remove();
    const link = document.createElement("a");
    link.href = `/ui/login?next=${encodeURIComponent(location.pathname)}`;
    link.textContent = "Sign in again";
    banner.replaceChildren("Your session has ended. ", link);
    banner.hidden = false;
  }

  async function signedOut() {
    try {
      return (await fetch(live, { credentials: "same-origin" })).status === 401;
    } catch (_) {
      return false;
    }
  }

  if (live) {
    let lost = false;
    let timer = null;
    const connect = () => {
      const events = new EventSource("/ui/events");
      events.addEventListener("hello", () => {
        banner.hidden = true;
        if (lost) { lost = false; refresh(); }
      });
      events.addEventListener("changed", () => {
        clearTimeout(timer);
        timer = setTimeout(refresh, 50);
      });
      events.onerror = async () => {
        banner.hidden = false;
        lost = true;
        if (events.readyState !== EventSource.CLOSED) return;  // the server is away: the browser retries by itself
        // The server answered, but not with events: the session may be gone; otherwise try again.
        if (await signedOut()) sessionEnded();
        else setTimeout(connect, 3000);
      };
    };
    connect();
  }
})();

// Gatehouse chat tab: talks A2A (JSON-RPC, streaming) to this agent from the browser, as any A2A client does. The
// agent's replies stream in; its pauses show inline as approval or question cards, decided with A2A messages on
// the paused task. Everything shown is set with textContent: nothing the agent says becomes markup.
(() => {
  "use strict";
  const G = window.Gatehouse;
  const list = document.getElementById("messages");
  const form = document.getElementById("chat-form");
  const input = document.getElementById("chat-input");
  let contextId = null;
  let pausedTask = null;  // the task waiting for a decision or an answer
  const shown = new Set();  // message ids (and "artifact:<id>" for replies) already on the page

  function bubble(kind, text) {
    const li = document.createElement("li");
    li.className = `msg ${kind}`;
    li.textContent = text;
    list.append(li);
    li.scrollIntoView({ block: "end" });
    return li;
  }

  function texts(parts) {
    return (parts || []).filter((p) => typeof p.text === "string").map((p) => p.text).join("\n").trim();
  }
  function datas(parts) {
    return (parts || []).filter((p) => p.data && typeof p.data === "object").map((p) => p.data);
  }

  function button(label, onClick, cls) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    if (cls) b.className = cls;
    b.addEventListener("click", onClick);
    return b;
  }

  function approvalCard(taskId, interrupt) {
    const li = document.createElement("li");
    li.className = "card chat-approval";
    li.dataset.task = taskId;
    const h = document.createElement("h2");
    h.textContent = "The agent asks to run:";
    li.append(h);
    for (const request of interrupt.action_requests || []) {
      const p = document.createElement("p");
      const tool = document.createElement("span");
      tool.className = "tool";
      tool.textContent = request.name;
      p.append(tool);
      if (request.hint) p.append(` (${request.hint})`);
      const pre = document.createElement("pre");
      pre.textContent = JSON.stringify(request.args, null, 2);
      li.append(p, pre);
    }
    const actions = document.createElement("div");
    actions.className = "actions";
    const reason = document.createElement("textarea");
    reason.rows = 2;
    reason.setAttribute("aria-label", "Reason for a denial (the agent is told)");
    reason.placeholder = "Reason for a denial (required to deny)";
    const done = () => { for (const b of li.querySelectorAll("button, textarea")) b.disabled = true; };
    actions.append(
      button("Approve", () => { done(); send(null, { decision_type: "approve" }, taskId); }),
      button("Deny", () => {
        if (!reason.value.trim()) { G.say("A denial needs a reason: the agent is told why its call did not run.", false); reason.focus(); return; }
        done();
        send(null, { decision_type: "deny", reason: reason.value.trim() }, taskId);
      }, "deny"),
    );
    li.append(reason, actions);
    list.append(li);
    li.scrollIntoView({ block: "end" });
  }

  function questionCard(taskId, interrupt) {
    for (const q of interrupt.requests || []) {
      const li = document.createElement("li");
      li.className = "card question";
      li.dataset.task = taskId;
      const p = document.createElement("p");
      p.className = "q";
      p.textContent = q.stage === "confirm" ? `You chose ${q.selected_option}. ${q.confirmation_message || "Confirm?"}` : q.question;
      const actions = document.createElement("div");
      actions.className = "actions options";
      const done = () => { for (const b of li.querySelectorAll("button")) b.disabled = true; };
      if (q.stage === "confirm") {
        actions.append(button("Confirm", () => { done(); send(null, { decision_type: "confirm" }, taskId); }),
                       button("Cancel", () => { done(); send(null, { decision_type: "cancel" }, taskId); }));
      } else {
        for (const option of q.options || []) {
          actions.append(button(option, () => { done(); send(null, { decision_type: "answer", answers: { [q.id]: option } }, taskId); }));
        }
        actions.append(button("Cancel", () => { done(); send(null, { decision_type: "cancel" }, taskId); }));
      }
      li.append(p, actions);
      list.append(li);
      li.scrollIntoView({ block: "end" });
    }
  }

  // What a pause asks, as one key: the same requests (or question and stage) on the same task are the same card.
  function pauseKey(taskId, data) {
    const asked = data.interrupt_type === "tool_approval"
      ? (data.action_requests || []).map((r) => r.id)
      : (data.requests || []).map((q) => `${q.id}:${q.stage || "answer"}`);
    return `${taskId} ${data.interrupt_type} ${asked.sort().join(",")}`;
  }

  function onStatus(taskId, status) {
    const message = status?.message;
    if (message && !shown.has(message.messageId)) {
      shown.add(message.messageId);
      const text = texts(message.parts);
      const paused = status.state === "TASK_STATE_INPUT_REQUIRED";
      let carded = false;  // a new card shows the pause: its text (which describes the same requests) is not repeated
      for (const data of datas(message.parts)) {
        if (!["tool_approval", "hitl_request"].includes(data.interrupt_type)) continue;
        const key = pauseKey(taskId, data);
        const cards = [...list.querySelectorAll("li[data-pause]")].filter((li) => li.dataset.task === taskId && !li.classList.contains("decided"));
        if (cards.some((li) => li.dataset.pause === key)) continue;  // restated (a message decided nothing): already here
        for (const old of cards) {  // the pause changed (part of it decided, a question's next stage): the new card replaces it
          for (const control of old.querySelectorAll("button, textarea")) control.disabled = true;
          old.classList.add("decided");
        }
        carded = true;
        const before = list.children.length;
        if (data.interrupt_type === "tool_approval") approvalCard(taskId, data);
        else questionCard(taskId, data);
        for (const li of [...list.children].slice(before)) li.dataset.pause = key;
      }
      // Otherwise the text is what the agent says now: a reply, or why a message decided nothing ("Could not read a
      // decision …": the request is still pending).
      if (text && !(paused && carded)) bubble("agent", text);
    }
    pausedTask = status?.state === "TASK_STATE_INPUT_REQUIRED" ? taskId : null;
    if (!pausedTask) {  // decided (here or elsewhere): its cards take no more clicks
      for (const card of list.querySelectorAll(`li[data-task="${CSS.escape(taskId)}"]`)) {
        for (const control of card.querySelectorAll("button, textarea")) control.disabled = true;
        card.classList.add("decided");
      }
    }
    if (["TASK_STATE_FAILED", "TASK_STATE_REJECTED", "TASK_STATE_CANCELED"].includes(status?.state)) {
      bubble("note", `The task ended: ${status.state.replace("TASK_STATE_", "").toLowerCase()}.`);
    }
  }

  // A finished turn's reply is the task's artifact (a fresh id each turn). The stream that sent a decision and the
  // one following the task (SubscribeToTask) both carry it: shown once, by artifact id.
  function artifactBubble(artifact) {
    const id = artifact?.artifactId;
    if (id) {
      if (shown.has(`artifact:${id}`)) return;
      shown.add(`artifact:${id}`);
    }
    const t = texts(artifact?.parts);
    if (t) bubble("agent", t);
  }

  function onEvent(result) {
    if (result.task) {
      contextId = result.task.contextId || contextId;
      onStatus(result.task.id, result.task.status);
      for (const artifact of result.task.artifacts || []) artifactBubble(artifact);
    } else if (result.statusUpdate) {
      contextId = result.statusUpdate.contextId || contextId;
      onStatus(result.statusUpdate.taskId, result.statusUpdate.status);
    } else if (result.artifactUpdate) {
      artifactBubble(result.artifactUpdate.artifact);
    } else if (result.message) {
      contextId = result.message.contextId || contextId;
      if (!shown.has(result.message.messageId)) {
        shown.add(result.message.messageId);
        const t = texts(result.message.parts);
        if (t) bubble("agent", t);
      }
    }
  }

  async function send(text, data, taskId) {
    const parts = [];
    if (text) parts.push({ text });
    if (data) parts.push({ data });
    const message = { parts };
    if (contextId) message.contextId = contextId;
    if (taskId) message.taskId = taskId;
    try {
      await G.a2a(message, onEvent);
    } catch (error) {
      bubble("note", `Not sent: ${error.message}`);
      return;
    }
    if (pausedTask) follow(pausedTask);
  }

  // While a task waits, follow it (SubscribeToTask): a decision made elsewhere (the inbox, REST, kubectl) resumes it,
  // and its reply shows here too. Replies already shown (by message or artifact id) are not shown twice.
  const following = new Set();
  async function follow(taskId) {
    if (following.has(taskId)) return;
    following.add(taskId);
    try {
      await G.rpc("SubscribeToTask", { id: taskId }, onEvent);
    } catch (_) {
      // the task finished meanwhile, or the connection dropped: the next message shows where it stands
    } finally {
      following.delete(taskId);
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    bubble("user", text);
    // A message while a call waits for a decision answers that task (approve, deny, or the words for them).
    send(text, null, pausedTask);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
  });
  document.addEventListener("click", (event) => {
    if (event.target.closest('[data-action="new-chat"]')) {
      contextId = null;
      pausedTask = null;
      list.replaceChildren();
      input.focus();
    }
  });
})();

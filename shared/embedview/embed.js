"use strict";

// eventStream reads one response body of an event stream as the WHATWG HTML
// standard's "event stream interpretation" says (Server-sent events, §9.2.6).
// source holds what outlives a connection: lastEventId (sent as Last-Event-ID on
// reconnect) and retry (the reconnection time, ms). The returned function takes
// the body's next chunk of bytes and returns the events it completes, each
// {type, data, lastEventId}. A new connection needs a new eventStream; an event
// left incomplete when a body ends is never dispatched. A top-level function, so
// that tests can drive it in the page.
function eventStream(source) {
  const decoder = new TextDecoder(); // UTF-8, streaming; drops one leading BOM
  let pending = ""; // an unterminated line
  let afterCR = false; // the last chunk ended with CR: a leading LF ends no line
  let data = "", type = "", id = source.lastEventId;
  let out;

  const dispatch = () => {
    source.lastEventId = id;
    if (data === "") {
      type = "";
      return;
    }
    if (data.endsWith("\n")) data = data.slice(0, -1);
    out.push({ type: type || "message", data, lastEventId: id });
    data = "";
    type = "";
  };

  const line = (l) => {
    if (l === "") return dispatch();
    if (l.startsWith(":")) return; // a comment
    const colon = l.indexOf(":");
    const field = colon < 0 ? l : l.slice(0, colon);
    let value = colon < 0 ? "" : l.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        type = value;
        break;
      case "data":
        data += value + "\n";
        break;
      case "id":
        if (!value.includes("\0")) id = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) source.retry = Number(value);
        break;
    }
  };

  return (bytes) => {
    out = [];
    let text = decoder.decode(bytes, { stream: true });
    if (text === "") return out; // a part of a character
    if (afterCR && text.startsWith("\n")) text = text.slice(1);
    pending += text;
    const ends = /\r\n|\r|\n/g;
    let from = 0;
    for (let m; (m = ends.exec(pending)); from = ends.lastIndex) line(pending.slice(from, m.index));
    afterCR = pending.endsWith("\r");
    pending = pending.slice(from);
    return out;
  };
}

(() => {
  const app = document.getElementById("app");
  const agentID = app.dataset.agentId;
  const token = app.dataset.token;
  app.removeAttribute("data-token");
  // Keep the token out of the address bar, history and any later referrer.
  const url = new URL(location.href);
  url.searchParams.delete("token");
  history.replaceState(null, "", url.pathname + url.search);

  const base = "/api/remote_agents/" + encodeURIComponent(agentID);
  const auth = { Authorization: "Bearer " + token };
  const $ = (role) => app.querySelector('[data-role="' + role + '"]');
  const thread = $("thread"), status = $("status"), form = $("composer-form"), composer = $("composer");
  const working = $("working"), live = $("live"), send = $("send"), stop = $("stop"), note = $("composer-note");
  const seen = new Set();
  const questions = new Map();
  // What the live channel shows before its event is stored: replies being
  // written (message_id → {li, node: its text, len: in code points, done:
  // stored, settled: abandoned}) and tool calls that started (tool_call_id →
  // the chip, which its tool.call updates).
  const streams = new Map();
  const tools = new Map();
  let attachments = [];
  // What outlives a connection to the event stream (see eventStream).
  const source = { lastEventId: "", retry: 1000 };

  let workspace = null;
  // closed: the agent takes no more messages (it ended, failed, or this page
  // may not reach it); the composer says why.
  let closed = false;
  const closeComposer = (why) => {
    closed = true;
    for (const c of app.querySelectorAll("form[data-role=composer-form] textarea, form[data-role=composer-form] button")) c.disabled = true;
    composer.placeholder = "";
    stop.hidden = true;
    note.textContent = why;
    note.hidden = false;
    composer.setAttribute("aria-describedby", "composer-note");
    scroll();
  };
  const add = (cls, text, role) => {
    const li = document.createElement("li");
    li.className = cls;
    if (role) li.dataset.role = role;
    li.textContent = text;
    thread.insertBefore(li, working); // the indicator stays last
    scroll();
    return li;
  };
  const scroll = () => {
    thread.scrollTop = thread.scrollHeight;
  };
  // The working indicator: on from a user's message (or the agent's start of
  // work) until its answer, a question, or idle.
  // The Stop button shows while the agent works.
  const busy = (on) => {
    working.hidden = !on;
    stop.hidden = !on || closed;
    if (on) scroll();
  };
  // announce tells screen readers about a new message (a polite live region;
  // only the last few stay in it).
  const announce = (text) => {
    const p = document.createElement("p");
    p.textContent = text.length > 500 ? text.slice(0, 500) + "…" : text;
    live.appendChild(p);
    while (live.childElementCount > 3) live.firstElementChild.remove();
  };
  // clip bounds what a tool call shows of its arguments and output.
  const clip = (s, n) => (s.length > n ? s.slice(0, n) + "… (" + (s.length - n) + " more characters)" : s);
  // generic is what every sanitised error starts with (a failed tool's
  // output, an agent's error): the view says it only when nothing follows.
  const generic = "The operation encountered an error.";
  const clientID = () => (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2));

  async function post(path, body) {
    const res = await fetch(base + path, {
      method: "POST",
      headers: { ...auth, "Content-Type": "application/json" },
      body: JSON.stringify(body),
      referrerPolicy: "no-referrer",
    });
    const out = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(out.message || "The request failed (" + res.status + ").");
    return out;
  }

  function render(ev) {
    if (seen.has(ev.seq)) return;
    seen.add(ev.seq);
    const d = ev.data || {};
    switch (ev.type) {
      case "user.message": {
        if (d.interrupt) {
          settle();
          add("activity", "The agent was stopped.", "interrupted");
          announce("The agent was stopped.");
          if (!d.text && !d.answer && !(d.attachments && d.attachments.length)) break;
        }
        let text = d.text || "";
        if (d.answer) text = text || "Answered: " + optionLabel(d.answer);
        if (d.attachments && d.attachments.length) text += (text ? "\n" : "") + "Attached: " + d.attachments.map((a) => a.name).join(", ");
        add("user", text, "message").dataset.seq = ev.seq;
        busy(true);
        break;
      }
      case "agent.message":
        if (d.text) agentMessage(ev.seq, d);
        else if (d.message_id) finish(d.message_id);
        if (d.usage) usage(d.usage);
        // A reply without tool calls is the agent's answer.
        if (!d.tool_calls) busy(false);
        break;
      case "agent.question":
        question(ev.seq, d);
        announce("The agent asks: " + d.text);
        busy(false);
        break;
      case "state.changed":
        status.textContent = stateText(d.state);
        busy(d.state === "working");
        if (d.state !== "working") settle();
        ended(d.state);
        break;
      case "agent.ready":
      case "agent.ended":
      case "agent.failed":
        // The platform's record of the agent's life.
        status.textContent = stateText(d.state);
        if (ev.type !== "agent.ready") {
          busy(false);
          settle();
        }
        ended(d.state || (ev.type === "agent.failed" ? "failed" : ev.type === "agent.ended" ? "ended" : ""));
        break;
      case "tool.call":
      case "workspace.tool":
        toolCall(ev.seq, d);
        break;
      case "agent.error": {
        // One clear line: the platform's sanitiser starts every error with
        // the same generic sentence, said here only when nothing follows it.
        const text = String(d.text || "").replace(generic, "").trim() || d.text || "Something went wrong.";
        add("error", text, "error");
        announce("Error: " + text);
        break;
      }
      case "budget.exceeded":
        add("error", d.message || "A spending limit was reached: the agent stops.", "budget");
        announce("Spending limit reached: " + (d.message || "the agent stops."));
        busy(false);
        break;
      case "egress.denied":
        // An activity line: the agent goes on (its sandbox was refused a
        // destination its egress policy does not allow).
        add("activity", "Blocked: " + (d.host || "") + (d.port ? ":" + d.port : "") + " is not allowed by this agent's network policy", "egress");
        break;
      case "env.request":
        envForm(d);
        break;
      case "output.verification":
        add("activity", "Verification evidence: " + (d.file_count || 0) + " file(s)", "activity");
        break;
      case "output.snapshot":
        add("activity", "Snapshot saved", "activity");
        break;
      case "workspace.creating":
        workspaceLine("Workspace: preparing…");
        break;
      case "workspace.cloning":
        workspaceLine("Workspace: cloning " + (d.repository_url || "") + (d.branch ? " (" + d.branch + ")" : "") + "…");
        break;
      case "workspace.restoring":
        workspaceLine("Workspace: restoring the saved snapshot…");
        break;
      case "workspace.env_files":
        workspaceLine("Workspace: writing " + (d.files || []).length + " env file(s)…");
        break;
      case "workspace.services":
        workspaceLine("Workspace: starting " + (d.services || []).map((s) => s.name).join(", ") + "…");
        break;
      case "workspace.setup":
        workspaceLine("Workspace: setup " + d.index + "/" + d.total + ": " + (d.command || ""));
        break;
      case "workspace.warning":
        add("activity error", "Workspace warning: " + (d.message || ""), "workspace-warning");
        break;
      case "workspace.ready":
        {
          const n = (d.warnings || []).length;
          workspaceLine(d.status === "degraded" ? "Workspace not provisioned: working without it (" + n + " warning(s))"
            : n > 0 ? "Workspace ready, set up in part (" + n + " warning(s))" : "Workspace ready");
        }
        break;
    }
  }

  // workspaceLine is the one compact line that says how the workspace's
  // provisioning goes (workspace: that line, once there), updated in place
  // phase by phase.
  function workspaceLine(text) {
    if (!workspace) workspace = add("activity", "", "workspace");
    workspace.textContent = text;
  }

  // agentMessage shows the agent's Markdown as the HTML the server rendered and
  // sanitised (html; the page's CSP is the second line), or as plain text. A
  // reply that was streaming (its message_id's) becomes it in place.
  function agentMessage(seq, d) {
    const s = d.message_id ? finish(d.message_id) : null;
    let li;
    if (s && s.li && s.li.isConnected) {
      li = s.li;
      li.replaceChildren();
    } else {
      li = add("agent", "", "message");
    }
    if (d.message_id) li.dataset.messageId = d.message_id;
    li.dataset.seq = seq;
    if (typeof d.html === "string" && d.html) {
      const md = document.createElement("div");
      md.className = "md";
      md.innerHTML = d.html.trim();
      for (const pre of md.querySelectorAll("pre")) codeBlock(pre);
      li.appendChild(md);
    } else {
      li.textContent = d.text;
    }
    scroll();
    announce("The agent says: " + li.textContent);
  }

  // finish marks the reply message_id as stored (its deltas are ignored from
  // now on) and returns its stream, the bubble no longer in progress.
  function finish(id) {
    const s = streams.get(id) || { li: null, node: null, len: 0 };
    s.done = true;
    streams.set(id, s);
    if (s.li) {
      s.li.removeAttribute("data-streaming");
      s.li.removeAttribute("aria-busy");
      if (!s.len) s.li.remove();
    }
    return s;
  }

  // settle ends what the live channel left in progress when the agent's
  // turn is over without it (it was stopped, or ended): a reply that will not
  // be stored stays as written so far, a tool call that will not report says
  // it stopped. Their events, if they come after all, still replace them.
  function settle() {
    for (const s of streams.values()) {
      if (s.done || s.settled || !s.li) continue;
      s.settled = true;
      s.li.removeAttribute("data-streaming");
      s.li.removeAttribute("aria-busy");
    }
    for (const li of tools.values()) {
      if (li.dataset.status !== "running") continue;
      li.dataset.status = "stopped";
      const st = li.querySelector(".status");
      if (st) st.textContent = "stopped";
    }
  }

  // delta adds a piece of a reply being written (agent.message.delta, or a
  // sync's partial): its text follows the first offset code points of the
  // reply. It is shown as plain text, as it comes, in a bubble marked in
  // progress (aria-busy, not announced: the stored reply replaces it and is
  // announced once). A piece past what the bubble holds is ignored (a sync or
  // the stored reply repairs it); the part of a piece the bubble has already
  // is not added twice. It says whether the bubble changed.
  function delta(d) {
    const id = d.message_id;
    if (typeof id !== "string" || !id || typeof d.text !== "string") return false;
    let s = streams.get(id);
    if (s && (s.done || s.settled)) return false;
    const len = s ? s.len : 0;
    const offset = Number(d.offset) || 0;
    if (offset < 0 || offset > len) return false;
    const extra = Array.from(d.text).slice(len - offset);
    if (!extra.length) return false;
    if (!s) {
      const li = add("agent", "", "message");
      li.dataset.messageId = id;
      li.dataset.streaming = "true";
      li.setAttribute("aria-busy", "true");
      s = { li, node: document.createTextNode(""), len: 0, done: false };
      li.appendChild(s.node);
      streams.set(id, s);
    }
    s.node.appendData(extra.join(""));
    s.len += extra.length;
    scroll();
    return true;
  }

  // codeBlock makes a code block of the agent's answer readable and usable:
  // highlighted, reachable by keyboard (it may scroll), with a copy button.
  function codeBlock(pre) {
    const code = pre.querySelector("code");
    if (code) highlight(code);
    pre.tabIndex = 0;
    const wrap = document.createElement("div");
    wrap.className = "code";
    pre.replaceWith(wrap);
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy";
    copy.dataset.role = "copy";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy the code");
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText((code || pre).textContent);
        copy.textContent = "Copied";
      } catch (e) {
        copy.textContent = "Copy failed";
      }
      setTimeout(() => (copy.textContent = "Copy"), 2000);
    });
    wrap.append(pre, copy);
  }

  // highlight colours a code element's text by token: comments, strings,
  // numbers and keywords, by the comment syntax its language class names
  // (C-like when it names none). It works on text, so nothing of the code
  // becomes markup; a long block is left plain.
  const keywords = new Set(("as async await break case catch chan class const continue def default defer del do elif else enum except export " +
    "extends false finally fn for from func function go if impl import in interface is lambda let map match mut nil none None not null or and " +
    "package pass pub raise range return select self static struct switch this throw true True False try type undefined use var while with yield").split(" "));
  function highlight(code) {
    const text = code.textContent;
    if (text.length > 20000) return;
    const lang = ((code.className.match(/language-([\w+#.-]+)/) || [])[1] || "").toLowerCase();
    const hash = /^(sh|bash|shell|zsh|console|python|py|ruby|rb|yaml|yml|toml|r|perl|make|makefile|dockerfile|ini|conf|elixir|nim)$/.test(lang);
    const comment = hash ? "#[^\\n]*" : /^(sql|lua|haskell|hs)$/.test(lang) ? "--[^\\n]*" : "\\/\\/[^\\n]*|\\/\\*[\\s\\S]*?\\*\\/";
    const re = new RegExp("(" + comment + ")|(\"(?:[^\"\\\\\\n]|\\\\.)*\"|'(?:[^'\\\\\\n]|\\\\.)*'|`[^`]*`)|\\b(\\d[\\d_]*(?:\\.\\d+)?)\\b|\\b([A-Za-z_]\\w*)\\b", "g");
    const out = document.createDocumentFragment();
    let from = 0;
    const span = (cls, t) => {
      const e = document.createElement("span");
      e.className = "tok-" + cls;
      e.textContent = t;
      out.appendChild(e);
    };
    for (let m; (m = re.exec(text)); ) {
      const cls = m[1] ? "comment" : m[2] ? "string" : m[3] ? "number" : keywords.has(m[4]) ? "keyword" : "";
      if (!cls) continue;
      out.appendChild(document.createTextNode(text.slice(from, m.index)));
      span(cls, m[0]);
      from = re.lastIndex;
    }
    out.appendChild(document.createTextNode(text.slice(from)));
    code.replaceChildren(out);
  }

  // Tools as people read them: what the agent did, and the argument that
  // says on what. Tools whose calls are shown otherwise (a question, a
  // request for values) have no line: their output is meant for the model.
  const toolNames = {
    bash: ["Ran a command", "command"], read: ["Read a file", "path"], write: ["Wrote a file", "path"], edit: ["Edited a file", "path"],
    ls: ["Listed files", "path"], glob: ["Found files", "pattern"], grep: ["Searched files", "pattern"],
    web_fetch: ["Fetched a page", "url"], web_search: ["Searched the web", "query"],
    memory_read: ["Read a note", "key"], memory_write: ["Saved a note", "key"], git: ["Ran git", "subcommand"],
    save_snapshot: ["Saved a snapshot"], save_service_commands: ["Saved the service commands"], verify: ["Saved verification evidence"],
  };
  const unshown = new Set(["ask_user", "request_env_variables"]);
  const readable = (tool) => {
    const t = String(tool || "tool").replace(/[_-]+/g, " ").trim();
    return t.charAt(0).toUpperCase() + t.slice(1);
  };

  // toolCall shows a tool call as one line (what the agent did, on what, and
  // its status) that opens to its arguments and output, each cut to a
  // bound; a failure is one error line. running: the call started
  // (tool.call.started, no seq), its result to come; the stored call of the
  // same tool_call_id then updates that line in place. It says whether it
  // showed anything.
  function toolCall(seq, d, running) {
    if (unshown.has(d.tool)) return false;
    const id = typeof d.tool_call_id === "string" && d.tool_call_id ? d.tool_call_id : "";
    let li = id ? tools.get(id) : null;
    if (li && running) return false; // shown already, started or done
    let open = false;
    if (li && li.isConnected) {
      open = li.querySelector("details").open;
      li.replaceChildren();
      li.className = "tool" + (d.is_error ? " error" : "");
    } else {
      li = add("tool" + (d.is_error ? " error" : ""), "", "tool-call");
    }
    if (id) {
      tools.set(id, li);
      li.dataset.toolCallId = id;
    }
    if (seq != null) li.dataset.seq = seq;
    li.dataset.tool = d.tool || "";
    li.dataset.status = running ? "running" : d.is_error ? "failed" : "done";
    const details = document.createElement("details");
    details.open = open;
    const summary = document.createElement("summary");
    const [label, argName] = Object.hasOwn(toolNames, d.tool) ? toolNames[d.tool] : [readable(d.tool)];
    let args = d.args || "", parsed = null;
    try {
      parsed = JSON.parse(args);
      args = JSON.stringify(parsed, null, 2);
    } catch (e) {
      /* not JSON: shown as it came */
    }
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = label;
    summary.appendChild(name);
    const on = argName && parsed && typeof parsed[argName] === "string" ? parsed[argName].split("\n")[0] : "";
    if (on) {
      const what = document.createElement("span");
      what.className = "summary";
      what.textContent = " " + clip(on, 80);
      summary.appendChild(what);
    }
    const st = document.createElement("span");
    st.className = "status";
    st.textContent = li.dataset.status;
    summary.append(" · ", st);
    details.appendChild(summary);
    const sections = [["Arguments", args, "tool-args"]];
    if (!d.is_error && !running) sections.push(["Output", d.output || "", "tool-output"]);
    for (const [caption, text, role] of sections) {
      if (!text || text === "{}") continue;
      const c = document.createElement("div");
      c.className = "caption";
      c.textContent = caption;
      const pre = document.createElement("pre");
      pre.dataset.role = role;
      pre.tabIndex = 0;
      pre.setAttribute("aria-label", caption);
      pre.textContent = clip(text, 2000);
      details.append(c, pre);
    }
    if (d.is_error) {
      const detail = String(d.output || "").replace(generic, "").trim();
      const line = document.createElement("p");
      line.className = "error-line";
      line.dataset.role = "tool-error";
      line.textContent = "Error: " + clip(detail || "the tool failed.", 500);
      details.appendChild(line);
    }
    li.appendChild(details);
    scroll();
    return true;
  }

  // ended closes the composer once the agent's state is an end.
  function ended(state) {
    if (state === "ended") closeComposer("This agent has ended: it takes no more messages.");
    else if (state === "failed") closeComposer("This agent stopped on an error: it takes no more messages.");
  }

  const stateText = (s) => ({ ready: "Ready", working: "Working…", idle: "Idle", ending: "Ending…", ended: "Ended", failed: "Failed",
    pausing: "Pausing…", paused: "Paused: messages wait for it to resume", resuming: "Resuming…" })[s] || s;

  function usage(u) {
    const used = $("context-used"), win = $("context-window");
    if (!used || !win) return;
    if (u.context_tokens != null) used.textContent = Number(u.context_tokens).toLocaleString();
    if (u.context_window) win.textContent = Number(u.context_window).toLocaleString();
  }

  function optionLabel(a) {
    const q = questions.get(a.question_id);
    const o = q && q.options.find((o) => o.id === a.option_id);
    return o ? o.label : a.option_id;
  }

  function question(seq, d) {
    questions.set(d.question_id, d);
    const li = add("question", d.text, "question");
    li.dataset.questionId = d.question_id;
    const box = document.createElement("div");
    box.className = "options";
    for (const o of d.options || []) {
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.role = "option";
      b.dataset.optionId = o.id;
      b.textContent = o.label;
      b.addEventListener("click", async () => {
        for (const x of box.querySelectorAll("button")) x.disabled = true;
        b.setAttribute("aria-pressed", "true");
        try {
          await post("/messages", { answer: { question_id: d.question_id, option_id: o.id }, client_message_id: clientID() });
          composer.focus();
        } catch (e) {
          for (const x of box.querySelectorAll("button")) x.disabled = false;
          b.removeAttribute("aria-pressed");
          add("error", e.message, "error");
        }
      });
      box.appendChild(b);
    }
    li.appendChild(box);
  }

  function envForm(d) {
    const li = add("question", "The agent asks for: " + (d.keys || []).map((k) => k.key).join(", "), "env-request");
    const f = document.createElement("form");
    f.className = "env";
    for (const k of d.keys || []) {
      const label = document.createElement("label");
      label.textContent = k.key + (k.description ? " — " + k.description : "");
      const input = document.createElement("input");
      input.name = k.key;
      input.type = k.type === "secret" ? "password" : "text";
      input.autocomplete = "off";
      label.appendChild(input);
      f.appendChild(label);
    }
    const send = document.createElement("button");
    send.textContent = "Send values";
    f.appendChild(send);
    f.addEventListener("submit", async (e) => {
      e.preventDefault();
      const values = {};
      for (const input of f.querySelectorAll("input")) if (input.value) values[input.name] = input.value;
      try {
        await post("/messages", { env_values: values, client_message_id: clientID() });
        f.replaceWith(document.createTextNode(" Sent."));
        composer.focus();
      } catch (err) {
        add("error", err.message, "error");
      }
    });
    li.appendChild(f);
  }

  // The connection's state, one for the page whichever channel it uses:
  // data-connection (open, reconnecting, closed) and the status line.
  const connected = () => {
    if (status.textContent === "Connecting…" || status.textContent.startsWith("Reconnecting")) status.textContent = "Connected";
    app.dataset.connection = "open";
  };
  const lost = (failures) => {
    status.textContent = "Reconnecting… (connection lost" + (failures > 1 ? ", attempt " + failures : "") + ")";
    app.dataset.connection = "reconnecting";
  };
  // Reconnects back off: the stream's retry, doubled at each failure in a
  // row up to 30 s, plus up to a quarter more (jitter, never sooner than the
  // stream asked); a connection that delivered starts over.
  const backoff = (failures) => Math.min(30000, source.retry * 2 ** (failures - 1)) * (1 + Math.random() / 4);
  // unavailable: this page may not reach the agent (its token was refused, or
  // the agent is gone); nothing reconnects.
  const unavailable = () => {
    status.textContent = "This agent is not available.";
    app.dataset.connection = "closed";
    busy(false);
    settle();
    closeComposer("This agent is not available: it takes no messages here.");
  };
  // over: the agent ended and every event was sent; nothing reconnects.
  const over = () => {
    status.textContent = "Ended";
    app.dataset.connection = "closed";
    busy(false);
    settle();
    if (!closed) closeComposer("This agent has ended: it takes no more messages.");
  };

  // Server-Sent Events over fetch, so that the token travels in a header, never
  // in a URL; reconnects resume after the last event id.
  async function listen() {
    let failures = 0;
    for (;;) {
      try {
        // X-Session-Token, not Authorization: on AWS CloudFront signs the
        // stream's requests, overwriting Authorization.
        const headers = { "X-Session-Token": token, Accept: "text/event-stream" };
        // The last event id in UTF-8, as a header value is a string of bytes.
        if (source.lastEventId !== "") headers["Last-Event-ID"] = String.fromCharCode(...new TextEncoder().encode(source.lastEventId));
        const res = await fetch(base + "/events", { headers, cache: "no-store", referrerPolicy: "no-referrer" });
        if (res.status === 401 || res.status === 403 || res.status === 404) return unavailable();
        if (!res.ok || !res.body) throw new Error("stream " + res.status);
        connected();
        const reader = res.body.getReader();
        const read = eventStream(source);
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const ev of read(value)) {
            failures = 0;
            if (ev.type === "end") return over();
            try {
              render(JSON.parse(ev.data));
            } catch (e) {
              /* a malformed event is skipped */
            }
            // For scripts in this window (tests, benchmarks): each event as it came.
            window.dispatchEvent(new CustomEvent("remote-agent:event", { detail: { id: Number(ev.lastEventId), type: ev.type, data: ev.data } }));
          }
        }
      } catch (e) {
        /* reconnect below */
      }
      failures++;
      lost(failures);
      await new Promise((r) => setTimeout(r, backoff(failures)));
    }
  }

  // The live channel (liveChannel): a WebSocket to the viewers' URL
  // (data-live-url; a path is this page's origin's, ws: or wss: as the page's
  // scheme), the agent's id in its query and, with the session token, in each
  // sync frame (a server behind API Gateway sees the query on connect only);
  // the token is never in a URL.
  // The page asks for the stored events after the last it showed in order
  // (sync), and the server pushes each append's events, and the live ones (a
  // reply as it is written, a tool call as it starts), as they happen. Stored
  // events are shown once each, in order: an older one is dropped, a later
  // one waits for those before it, and a gap still there a second later is
  // asked for again. The page falls back to the event stream (listen) when
  // the socket fails to open 3 times in a row, when the server has too many
  // viewers (429), or answers an error the page cannot act on; a socket that
  // closes after it opened reconnects with the stream's backoff and syncs
  // again from the last event shown.
  let last = 0; // the highest seq shown with every one before it
  const waiting = new Map(); // seq → a stored event that came before its predecessors
  const liveURL = app.dataset.liveUrl || "";
  app.removeAttribute("data-live-url");

  // stored shows a stored event if it is the next one, and any that waited
  // for it; a later one waits. jump: the event is in a sync's answer, which
  // holds every event after the sync's cursor, so none is missing before it.
  function stored(ev, jump) {
    const seq = Number(ev && ev.seq);
    if (!Number.isSafeInteger(seq) || seq <= last) return;
    if (seq !== last + 1 && !jump) {
      waiting.set(seq, ev);
      return;
    }
    show(ev);
    last = seq;
    drain();
  }
  function drain() {
    for (const seq of waiting.keys()) if (seq <= last) waiting.delete(seq);
    for (let ev; (ev = waiting.get(last + 1)); ) {
      waiting.delete(last + 1);
      show(ev);
      last++;
    }
  }
  function show(ev) {
    try {
      render(ev);
    } catch (e) {
      /* a malformed event is skipped */
    }
    window.dispatchEvent(new CustomEvent("remote-agent:event", { detail: { id: Number(ev.seq), type: ev.type, data: JSON.stringify(ev) } }));
  }
  // ephemeral applies a live event (or a sync's partial, partial true) and
  // tells scripts in this window (remote-agent:live) when it showed.
  function ephemeral(type, d, partial) {
    if (!d || typeof d !== "object") return;
    const shown = type === "agent.message.delta" ? delta(d) : type === "tool.call.started" ? toolCall(null, d, true) : false;
    if (!shown) return;
    const detail = { type, data: d };
    if (typeof d.message_id === "string") detail.message_id = d.message_id;
    if (partial) detail.partial = true;
    window.dispatchEvent(new CustomEvent("remote-agent:live", { detail }));
  }

  function liveChannel() {
    let failures = 0; // reconnects in a row, for the backoff
    let unopened = 0; // sockets in a row that never opened
    let ws = null;
    let gap = 0; // the timer that asks again for what a gap lacks
    const sync = () => ws && ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ action: "sync", agent: agentID, token, after: last }));
    const watchGap = () => {
      if (!waiting.size) {
        clearTimeout(gap);
        gap = 0;
      } else if (!gap) {
        gap = setTimeout(() => {
          gap = 0;
          drain();
          if (!waiting.size) return;
          sync();
          watchGap();
        }, 1000);
      }
    };
    // leave stops the socket for good: the agent is over or not available
    // here, or the event stream takes over (then after the last event shown).
    const leave = (then) => {
      const w = ws;
      ws = null;
      clearTimeout(gap);
      gap = 0;
      if (w) {
        w.onclose = w.onmessage = w.onerror = null;
        try {
          w.close(1000);
        } catch (e) {
          /* closed already */
        }
      }
      if (then === "stream") {
        if (last > 0) source.lastEventId = String(last);
        listen();
      } else if (then === "over") over();
      else unavailable();
    };
    const retry = (opened) => {
      ws = null;
      clearTimeout(gap);
      gap = 0;
      if (!opened && ++unopened >= 3) return leave("stream");
      failures++;
      lost(failures);
      setTimeout(open, backoff(failures));
    };
    const frame = (f) => {
      switch (f.type) {
        case "sync": {
          failures = 0;
          connected();
          for (const ev of Array.isArray(f.events) ? f.events : []) stored(ev, true);
          const cursor = Number(f.seq);
          if (Number.isSafeInteger(cursor) && cursor > last) last = cursor;
          drain();
          if (f.partial) ephemeral("agent.message.delta", f.partial, true);
          if (f.more) sync();
          break;
        }
        case "events":
          connected();
          for (const ev of Array.isArray(f.events) ? f.events : []) stored(ev, false);
          break;
        case "live":
          connected();
          for (const ev of Array.isArray(f.events) ? f.events : []) if (ev) ephemeral(ev.type, ev.data, false);
          break;
        case "end":
          return leave("over");
        case "error": {
          const e = f.error || {};
          if (e.status === 401 || e.status === 403 || e.status === 404) return leave("unavailable");
          // Too many viewers, or an error the page cannot act on: the event
          // stream serves it.
          if (e.status === 429 || !e.retryable) return leave("stream");
          const w = ws;
          w.onclose = w.onmessage = w.onerror = null;
          w.close(1000);
          return retry(true);
        }
      }
      watchGap();
    };
    const open = () => {
      let w, opened = false;
      try {
        const u = new URL(liveURL, location.href);
        if (u.protocol === "http:") u.protocol = "ws:";
        else if (u.protocol === "https:") u.protocol = "wss:";
        u.searchParams.set("agent", agentID);
        w = ws = new WebSocket(u.href);
      } catch (e) {
        return retry(false);
      }
      // A socket still opening after 10 s is one that failed to open.
      const slow = setTimeout(() => w.readyState === WebSocket.CONNECTING && w.close(), 10000);
      w.onopen = () => {
        opened = true;
        unopened = 0;
        clearTimeout(slow);
        sync();
      };
      w.onmessage = (m) => {
        if (ws !== w) return;
        let f;
        try {
          f = JSON.parse(m.data);
        } catch (e) {
          return; // not a frame of this protocol
        }
        if (f && typeof f === "object") frame(f);
      };
      w.onclose = () => {
        clearTimeout(slow);
        if (ws === w) retry(opened);
      };
    };
    open();
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = composer.value.trim();
    if (closed || (!text && !attachments.length)) return;
    const body = { text, client_message_id: clientID() };
    if (attachments.length) body.attachments = attachments;
    composer.disabled = send.disabled = true;
    try {
      await post("/messages", body);
      busy(true);
      composer.value = "";
      attachments = [];
      const list = $("attachments");
      if (list) list.textContent = "";
    } catch (err) {
      add("error", err.message, "error");
    } finally {
      if (!closed) {
        composer.disabled = send.disabled = false;
        composer.focus();
      }
    }
  });
  // Stop cuts the agent's turn short: its model call or tool stops, and it
  // is idle, ready for the next message.
  stop.addEventListener("click", async () => {
    stop.disabled = true;
    try {
      await post("/messages", { interrupt: true, client_message_id: clientID() });
      busy(false);
    } catch (err) {
      add("error", err.message, "error");
    } finally {
      stop.disabled = false;
      if (!closed) composer.focus();
    }
  });
  composer.addEventListener("keydown", (e) => {
    // Enter sends; Shift+Enter is a new line; Enter that ends an input
    // method's composition is neither.
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });

  const fileInput = $("file-input");
  if (fileInput) {
    $("attach").addEventListener("click", () => fileInput.click());
    fileInput.addEventListener("change", async () => {
      for (const file of fileInput.files) {
        try {
          const up = await post("/attachments", { name: file.name, size_bytes: file.size, content_type: file.type || "application/octet-stream" });
          // The headers are signed (the browser sets Content-Length from the file).
          const put = await fetch(up.upload_url, { method: "PUT", body: file, headers: up.upload_headers || {}, referrerPolicy: "no-referrer" });
          if (!put.ok) throw new Error("The upload of " + file.name + " failed.");
          attachments.push({ key: up.key, name: file.name, size_bytes: file.size, content_type: file.type || "application/octet-stream" });
          const li = document.createElement("li");
          li.textContent = "Attached: " + file.name;
          $("attachments").appendChild(li);
        } catch (err) {
          add("error", err.message, "error");
        }
      }
      fileInput.value = "";
    });
  }

  const mic = $("mic");
  if (mic) {
    const Recognition = window.SpeechRecognition || window.webkitSpeechRecognition;
    if (!Recognition) {
      mic.disabled = true;
      mic.title = "Speech recognition is not available in this browser";
    } else {
      mic.addEventListener("click", () => {
        const rec = new Recognition();
        rec.lang = navigator.language || "en-US";
        rec.interimResults = false;
        rec.onresult = (e) => {
          composer.value += (composer.value ? " " : "") + e.results[0][0].transcript;
        };
        rec.onend = () => mic.removeAttribute("aria-pressed");
        mic.setAttribute("aria-pressed", "true");
        rec.start();
      });
    }
  }

  if (liveURL && typeof WebSocket === "function") liveChannel();
  else listen();
  if (window.parent !== window) window.parent.postMessage({ type: "remote-agent:ready", agent_id: agentID }, "*");
})();

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
        ended(d.state);
        break;
      case "agent.ready":
      case "agent.ended":
      case "agent.failed":
        // The platform's record of the agent's life.
        status.textContent = stateText(d.state);
        if (ev.type !== "agent.ready") busy(false);
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
  // sanitised (html; the page's CSP is the second line), or as plain text.
  function agentMessage(seq, d) {
    const li = add("agent", "", "message");
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
  // bound; a failure is one error line.
  function toolCall(seq, d) {
    if (unshown.has(d.tool)) return;
    const li = add("tool" + (d.is_error ? " error" : ""), "", "tool-call");
    li.dataset.seq = seq;
    li.dataset.tool = d.tool || "";
    const details = document.createElement("details");
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
    st.textContent = d.is_error ? "failed" : "done";
    summary.append(" · ", st);
    details.appendChild(summary);
    const sections = [["Arguments", args, "tool-args"]];
    if (!d.is_error) sections.push(["Output", d.output || "", "tool-output"]);
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

  // Server-Sent Events over fetch, so that the token travels in a header, never
  // in a URL; reconnects resume after the last event id.
  async function listen() {
    // Reconnects back off: the stream's retry, doubled at each failure in a
    // row up to 30 s, plus up to a quarter more (jitter, never sooner than
    // the stream asked); a connection that delivered starts over.
    let failures = 0;
    for (;;) {
      try {
        // X-Session-Token, not Authorization: on AWS CloudFront signs the
        // stream's requests, overwriting Authorization.
        const headers = { "X-Session-Token": token, Accept: "text/event-stream" };
        // The last event id in UTF-8, as a header value is a string of bytes.
        if (source.lastEventId !== "") headers["Last-Event-ID"] = String.fromCharCode(...new TextEncoder().encode(source.lastEventId));
        const res = await fetch(base + "/events", { headers, cache: "no-store", referrerPolicy: "no-referrer" });
        if (res.status === 401 || res.status === 403 || res.status === 404) {
          status.textContent = "This agent is not available.";
          app.dataset.connection = "closed";
          busy(false);
          closeComposer("This agent is not available: it takes no messages here.");
          return;
        }
        if (!res.ok || !res.body) throw new Error("stream " + res.status);
        if (status.textContent === "Connecting…" || status.textContent.startsWith("Reconnecting")) status.textContent = "Connected";
        app.dataset.connection = "open";
        const reader = res.body.getReader();
        const read = eventStream(source);
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const ev of read(value)) {
            failures = 0;
            if (ev.type === "end") {
              status.textContent = "Ended";
              app.dataset.connection = "closed";
              busy(false);
              if (!closed) closeComposer("This agent has ended: it takes no more messages.");
              return;
            }
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
      const wait = Math.min(30000, source.retry * 2 ** (failures - 1)) * (1 + Math.random() / 4);
      status.textContent = "Reconnecting… (connection lost" + (failures > 1 ? ", attempt " + failures : "") + ")";
      app.dataset.connection = "reconnecting";
      await new Promise((r) => setTimeout(r, wait));
    }
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

  listen();
  if (window.parent !== window) window.parent.postMessage({ type: "remote-agent:ready", agent_id: agentID }, "*");
})();

// A chat page on @langchain/react's useStream, which speaks LangGraph's
// thread-centric protocol (POST /threads/{id}/commands and
// /threads/{id}/stream/events), as a front end would write it: the
// server's URL, the assistant and the thread come from the query string
// (?api=…&assistant=…&thread=…&transport=websocket); the thread id is kept
// in the URL so that a reload rejoins the thread and its run in flight.
import React, { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/react";

const params = new URLSearchParams(location.search);

function keepThread(id) {
  const p = new URLSearchParams(location.search);
  p.set("thread", id);
  history.replaceState(null, "", "?" + p.toString());
}

function text(m) {
  if (typeof m.content === "string") return m.content;
  return (m.content ?? []).map((c) => c.text ?? "").join("");
}

function kind(m) {
  return typeof m.getType === "function" ? m.getType() : m.type;
}

function App() {
  const [threadId, setThreadId] = useState(params.get("thread"));
  const [draft, setDraft] = useState("");
  const options = {
    apiUrl: params.get("api"),
    assistantId: params.get("assistant") ?? "chat",
    threadId,
    onThreadId: (id) => {
      setThreadId(id);
      keepThread(id);
    },
  };
  if (params.get("transport") === "websocket") options.transport = "websocket";
  const stream = useStream(options);
  const send = () => {
    stream.submit({ messages: [{ type: "human", content: draft }] });
    setDraft("");
  };
  return (
    <main>
      <ol id="messages">
        {stream.messages.map((m, i) => (
          <li key={m.id ?? i} className={kind(m)}>{text(m)}</li>
        ))}
      </ol>
      <p id="status">{stream.isLoading ? "loading" : "idle"}</p>
      {stream.interrupt && (
        <section id="interrupt">
          <pre id="interrupt-value">{JSON.stringify(stream.interrupt.value)}</pre>
          <button id="approve" onClick={() => stream.respond({ decisions: [{ type: "approve" }] })}>Approve</button>
        </section>
      )}
      <input id="input" value={draft} onChange={(e) => setDraft(e.target.value)} />
      <button id="send" onClick={send}>Send</button>
      <p id="error">{stream.error ? String(stream.error.message ?? stream.error) : ""}</p>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);

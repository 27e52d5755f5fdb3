// A chat page on the official useStream hook, as a front end would write
// it: the server's URL, the assistant and the thread come from the query
// string (?api=…&assistant=…&thread=…); the thread id is kept in the URL so
// that a reload rejoins the thread, and reconnectOnMount rejoins a run in
// flight.
import React, { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const params = new URLSearchParams(location.search);

function keepThread(id) {
  const p = new URLSearchParams(location.search);
  p.set("thread", id);
  history.replaceState(null, "", "?" + p.toString());
}

function text(m) {
  return typeof m.content === "string" ? m.content : m.content.map((c) => c.text ?? "").join("");
}

function App() {
  const [threadId, setThreadId] = useState(params.get("thread"));
  const [draft, setDraft] = useState("");
  const stream = useStream({
    apiUrl: params.get("api"),
    assistantId: params.get("assistant") ?? "chat",
    messagesKey: "messages",
    threadId,
    onThreadId: (id) => {
      setThreadId(id);
      keepThread(id);
    },
    reconnectOnMount: true,
  });
  const send = () => {
    stream.submit({ messages: [{ type: "human", content: draft }] }, { streamMode: ["values", "messages-tuple"] });
    setDraft("");
  };
  return (
    <main>
      <ol id="messages">
        {stream.messages.map((m) => (
          <li key={m.id} className={m.type}>{text(m)}</li>
        ))}
      </ol>
      <p id="status">{stream.isLoading ? "loading" : "idle"}</p>
      {stream.interrupt && (
        <section id="interrupt">
          <pre id="interrupt-value">{JSON.stringify(stream.interrupt.value)}</pre>
          <button id="approve" onClick={() => stream.submit({}, { command: { resume: { decisions: [{ type: "approve" }] } } })}>Approve</button>
        </section>
      )}
      <input id="input" value={draft} onChange={(e) => setDraft(e.target.value)} />
      <button id="send" onClick={send}>Send</button>
      <button id="stop" onClick={() => stream.stop()}>Stop</button>
      <p id="error">{stream.error ? String(stream.error.message ?? stream.error) : ""}</p>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);

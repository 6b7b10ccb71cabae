/**
 * `rx demo`: a complete goal with a built-in scripted model, so a new user sees rx work with
 * no model installed. The tools, the workspace and the SQLite log are real; only the model's
 * answers are written in advance (the edit reads the file's hash from the previous result,
 * as a real model must).
 */
import { Effect } from "effect"
import { LanguageModel } from "@rx/kernel"

export const goal = "Replace the TODO line in notes.txt with a one-line summary, then check it."

/** The files the demo workspace starts with. */
export const files: Readonly<Record<string, string>> = {
  "notes.txt": [
    "rx keeps an append-only log of every step.",
    "A tool call is recorded before it runs.",
    "TODO: write the summary",
    ""
  ].join("\n"),
  "README.md": "# demo workspace\n\nCreated by `rx demo`.\n"
}

/** The sha256 the previous `read_file` returned, read from the request as a model would. */
const lastSha = (request: LanguageModel.Request): string => {
  const last = request.messages.at(-1)
  const parsed: unknown = last?.role === "tool" ? JSON.parse(last.content) : undefined
  return typeof parsed === "object" && parsed !== null && "sha256" in parsed && typeof parsed.sha256 === "string"
    ? parsed.sha256
    : ""
}

export const script: ReadonlyArray<LanguageModel.Step> = [
  LanguageModel.callTool("list_dir", { path: "." }, "Let me see what is in the workspace."),
  LanguageModel.callTool("read_file", { path: "notes.txt" }, "I will read the notes."),
  (request) =>
    Effect.succeed(LanguageModel.callTool("edit_file", {
      path: "notes.txt",
      old_text: "TODO: write the summary",
      new_text: "Summary: every step is logged before it runs, so rx can resume and replay.",
      expected_sha256: lastSha(request)
    }, "Now I replace the TODO line, proving I read the current version.")),
  LanguageModel.callTool("search_text", { pattern: "^Summary:" }, "Let me check the edit landed."),
  LanguageModel.done("notes.txt now ends with a one-line summary instead of the TODO.")
]

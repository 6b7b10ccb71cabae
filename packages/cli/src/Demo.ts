/**
 * `rx demo`: a complete goal with a built-in scripted model, so a new user sees rx work with
 * no model installed. The tools, the workspace and the SQLite log are real; only the model's
 * answers are written in advance (the edit reads the file's hash from the previous result,
 * as a real model must).
 */
import { FileSystem, Path } from "@effect/platform"
import { LanguageModel, Replay, Runner, StateStore } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"
import * as View from "@rx/server/View"
import { Builtins } from "@rx/tools"
import { Effect, Layer } from "effect"
import type * as Usage from "./Usage.js"
import * as ExitCode from "./ExitCode.js"
import { sandboxHere } from "./internal/config.js"
import { type ExitStatus, note, printer, say, setExit } from "./internal/goal.js"
import * as Render from "./Render.js"

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

/** `rx demo`: the goal above in a temporary folder, then `rx inspect` and `rx replay` of it. */
export const demo = (flags: Usage.Input<typeof Usage.demo>): Effect.Effect<void, unknown, FileSystem.FileSystem | Path.Path | ExitStatus> =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    // Removed when the demo ends (after its log is closed), unless --keep.
    const root = flags.keep ? yield* fs.makeTempDirectory({ prefix: "rx-demo-" }) : yield* fs.makeTempDirectoryScoped({ prefix: "rx-demo-" })
    const workspace = path.join(root, "workspace")
    const db = path.join(root, "rx.db")
    const human = (text: string) => (flags.json ? Effect.void : say(text))
    yield* fs.makeDirectory(workspace)
    yield* Effect.forEach(Object.entries(files), ([name, text]) => fs.writeFileString(path.join(workspace, name), text), { discard: true })
    // The tools as a real run gets them: sandbox mode auto, and what it means here.
    const here = yield* sandboxHere(workspace)
    yield* human([
      "rx demo: the model is SCRIPTED (its answers are written in advance), so this runs with no model installed.",
      "Everything else is real: the tools, the workspace, the SQLite log.",
      `  workspace ${workspace}`,
      `  database  ${db}`,
      `  ${here.line}`,
      ""
    ].join("\n"))
    const services = Layer.mergeAll(
      Builtins.layer({ workspace, sandbox: "auto" }),
      LanguageModel.layerScripted(script)
    )
    const result = yield* Effect.gen(function*() {
      const outcome = yield* Runner.run({
        goal: goal,
        options: { maxIterations: 10, settings: { workspace, sandbox: "auto", model: "scripted demo model", baseUrl: "(none)" } },
        observe: printer(flags.json)
      }).pipe(Effect.provide(services))
      const log = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(outcome.goalId))
      yield* human(`\n${Render.endLine(outcome, ExitCode.of(outcome))}\n\n--- rx inspect ${outcome.goalId}\n`)
      const submitted = log[0]
      if (submitted?._tag === "GoalSubmitted") yield* human(Render.inspect(View.goal(submitted, log)).join("\n"))
      const replayed = yield* Replay.verify(log)
      yield* human(`\n--- rx replay ${outcome.goalId}\nidentical: ${log.length} events reproduced with no live calls (${replayed.reason})`)
      yield* human(`\nnotes.txt now reads:\n${yield* fs.readFileString(path.join(workspace, "notes.txt"))}`)
      yield* human(
        flags.keep
          ? `Look again with: rx inspect ${outcome.goalId} --db ${db}`
          : "The demo's folder is removed now; rx demo --keep keeps it, to look again with rx inspect."
      )
      return outcome
    }).pipe(Effect.provide(SqliteStore.layer({ filename: db })))
    if (flags.keep && flags.json) yield* note(`the demo's folder is kept: ${root}`)
    yield* setExit(ExitCode.of(result))
  }))


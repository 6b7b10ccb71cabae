/**
 * `View.steps`, the one view of a goal's steps that `rx inspect`, its `--json` and the web
 * inspector render: it drops no event of a step, keeps the log's order, and encodes and decodes
 * as its Schema says, for any events and for every golden log a released rx wrote.
 */
import { describe, expect, it } from "@effect/vitest"
import { Event } from "@rx/kernel"
import { View } from "@rx/server"
import { Arbitrary, Either, FastCheck as fc, Schema } from "effect"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"

/** Each event a view's entries stand for: an entry's own seq, and a call's outcome (the same seq for an outcome whose start is not in the log). */
const seqsOf = (steps: ReadonlyArray<View.Step>) =>
  steps.flatMap((s) => s.entries.flatMap((e) => (e._tag === "Call" && e.endSeq !== undefined && e.endSeq !== e.seq ? [e.seq, e.endSeq] : [e.seq])))

/** The events a step shows: every one after the submission and before the first step (iteration 0). */
const shown = (events: ReadonlyArray<Event.Event>) => events.filter((e) => e.iteration !== 0 && e._tag !== "GoalSubmitted").map((e) => e.seq)

const roundTrip = Schema.decodeUnknownSync(Schema.Array(View.Step))
const encode = Schema.encodeSync(Schema.Array(View.Step))

/** Any events, each with its own seq (as a log's are). */
const anyLog = fc.array(Arbitrary.make(Event.Event), { maxLength: 60 }).map((events) => events.map((e, seq) => ({ ...e, seq })))

describe("View.steps", () => {
  it.prop("drops no event and keeps the log's order, for any events; the view encodes and decodes to itself", [anyLog], ([events]) => {
    const steps = View.steps(events)
    expect(seqsOf(steps).sort((a, b) => a - b)).toEqual(shown(events))
    for (const s of steps) expect(s.entries.map((e) => e.seq)).toEqual([...s.entries.map((e) => e.seq)].sort((a, b) => a - b))
    expect(roundTrip(encode(steps))).toEqual(steps)
  })

  it("a call is one entry from its start to its outcome; a command that did not exit 0 says how", () => {
    const base = { goalId: "g", at: 1, iteration: 1 }
    const steps = View.steps([
      { ...base, _tag: "ToolStarted", seq: 1, callId: "g:1", tool: "shell", input: { command: "false" } },
      { ...base, _tag: "ToolSucceeded", seq: 2, callId: "g:1", tool: "shell", output: { exit_code: 3, stdout: "", stderr: "one\nlast\n" }, durationMs: 4 },
      { ...base, _tag: "ToolStarted", seq: 3, callId: "g:1:1", tool: "read_file", input: { path: "x" } },
      { ...base, _tag: "ToolFailed", seq: 4, callId: "g:1:1", tool: "read_file", error: { kind: "unknown", message: "rx stopped" }, durationMs: 9_000 }
    ])
    expect(steps).toEqual([{
      step: 1,
      entries: [
        { _tag: "Call", seq: 1, callId: "g:1", tool: "shell", input: { command: "false" }, outcome: "command failed", endSeq: 2, output: { exit_code: 3, stdout: "", stderr: "one\nlast\n" }, durationMs: 4, failed: "exit 3", stderrLastLine: "last" },
        { _tag: "Call", seq: 3, callId: "g:1:1", tool: "read_file", input: { path: "x" }, outcome: "unknown", endSeq: 4, error: { kind: "unknown", message: "rx stopped" }, durationMs: null, spanMs: 9_000 }
      ]
    }])
  })
})

describe("View.steps of the golden logs", () => {
  const root = join(import.meta.dirname, "..", "..", "kernel", "test", "logs")
  const versions = readdirSync(root).filter((name) => statSync(join(root, name)).isDirectory()).sort()
  for (const version of versions) {
    const eventVersion = (JSON.parse(readFileSync(join(root, version, "manifest.json"), "utf8")) as { readonly eventVersion: number }).eventVersion
    for (const file of readdirSync(join(root, version)).filter((name) => name.endsWith(".jsonl")).sort()) {
      it(`${version}/${file}: every event of a step is in the view, in order, and its calls end as the log says`, () => {
        const events = readFileSync(join(root, version, file), "utf8").split("\n").filter((line) => line.trim() !== "").map((line) => Either.getOrThrow(Event.decodeJson(line, eventVersion)))
        const steps = View.steps(events)
        expect(seqsOf(steps).sort((a, b) => a - b)).toEqual(shown(events))
        const ended = new Map(events.flatMap((e) => (e._tag === "ToolSucceeded" || e._tag === "ToolFailed" ? [[e.callId, e.seq] as const] : [])))
        for (const s of steps) {
          for (const e of s.entries) if (e._tag === "Call") expect(e.endSeq).toBe(ended.get(e.callId))
        }
        expect(roundTrip(encode(steps))).toEqual(steps)
      })
    }
  }
})

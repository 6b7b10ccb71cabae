/**
 * Recorded goals as tests: a goal run with a scripted model and a tool that writes a ledger file,
 * then every recorded model decision asked again of other scripted models. The requests are the
 * ones the run sent, byte for byte; the comparison names the step and the kind that differ; no
 * tool runs (the ledger is untouched).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Eval from "@rx/host/Eval"
import { type Event, LanguageModel, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Effect, Either, Layer, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"


const ledger = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "rx-eval-")), "ledger.txt")

/** Appends a line to the ledger: each run of it is seen there. */
const append = Tool.make({
  name: "append",
  description: "Append a line to the ledger.",
  idempotent: false,
  input: Schema.Struct({ line: Schema.String }),
  output: Schema.Struct({ ok: Schema.Boolean }),
  execute: ({ line }) => Effect.sync(() => (fs.appendFileSync(ledger, `${line}\n`), { ok: true }))
})
const erase = Tool.make({
  name: "erase",
  description: "Erase the ledger.",
  idempotent: false,
  input: Schema.Struct({}),
  output: Schema.Struct({ ok: Schema.Boolean }),
  execute: () => Effect.sync(() => (fs.writeFileSync(ledger, ""), { ok: true }))
})

const script = [
  LanguageModel.callTool("append", { line: "a" }),
  LanguageModel.callTool("erase", {}),
  LanguageModel.callTool("append", { line: "b" }),
  LanguageModel.done("two lines")
]

/** The recorded goal: `erase` needs approval, and a person (ann) denies it. Returns its log and the requests the model received. */
const recordGoal = Effect.gen(function*() {
  fs.writeFileSync(ledger, "")
  const requests: Array<LanguageModel.Request> = []
  const steps = script.map((answer): LanguageModel.Step => (request) => Effect.sync(() => (requests.push(request), answer)))
  const approve: Runner.Approver = () => Effect.succeed(Option.some({ approved: false, reason: "keep the ledger", by: "ann" }))
  const events = yield* Effect.gen(function*() {
    const result = yield* Runner.run({ goal: "write a and b to the ledger", goalId: "g1", instructions: "Be careful.", options: { approval: { erase: "ask" } }, approve })
    expect(result).toMatchObject({ status: "terminated", reason: "done" })
    return yield* Effect.flatMap(StateStore.StateStore, (store) => store.load("g1"))
  }).pipe(
    Effect.provide(Layer.mergeAll(StateStore.layerMemory, ToolRegistry.layer([append, erase]), LanguageModel.layerScripted(steps)))
  )
  expect(fs.readFileSync(ledger, "utf8")).toBe("a\nb\n")
  return { events, requests }
})

const evaluate = (events: ReadonlyArray<Event.Event>, candidate: ReadonlyArray<LanguageModel.Step>, options: Eval.Options = {}) =>
  Eval.run([events], options).pipe(Effect.provide(LanguageModel.layerScripted(candidate)))

describe("Eval", () => {
  it.effect("rebuilds each request the model received, exactly; with other instructions when asked", () =>
    Effect.gen(function*() {
      const { events, requests } = yield* recordGoal
      const recorded = Either.getOrThrow(Eval.recorded(events))
      expect(recorded.map((r) => r.iteration)).toEqual([1, 2, 3, 4])
      expect(recorded.map((r) => Eval.request(r))).toEqual(requests)
      const other = Eval.request(recorded[1] as Eval.Recorded, "Never erase anything.")
      expect(other.messages[0]?.content).toContain("Never erase anything.")
      expect(other.messages[0]?.content).not.toContain("Be careful.")
      expect(other.messages.slice(1)).toEqual(requests[1]?.messages.slice(1))
    }))

  it.effect("the same scripted model agrees on every step; a denied call is marked; no tool runs", () =>
    Effect.gen(function*() {
      const { events } = yield* recordGoal
      const report = yield* evaluate(events, script)
      expect(fs.readFileSync(ledger, "utf8")).toBe("a\nb\n")
      expect(report.summary).toMatchObject({ requests: 4, agreement: 1, byKind: { same: 4, same_tools: 0, other_tools: 0, no_action: 0, failed: 0 } })
      const [goal] = report.goals
      expect(goal?.steps.map((s) => [s.iteration, s.kind])).toEqual([[1, "same"], [2, "same"], [3, "same"], [4, "same"]])
      expect(goal?.steps[1]?.approvals).toEqual([{ callId: "g1:2", tool: "erase", approved: false, by: "ann", reason: "keep the ledger" }])
      expect(goal?.steps.filter((s) => s.approvals.length > 0).map((s) => s.iteration)).toEqual([2])
      expect(goal?.steps[3]?.recorded.calls).toEqual([{ tool: "done", input: { summary: "two lines" } }])
    }))

  it.effect("a model that differs at step 3 is named at step 3, with the kind of difference", () =>
    Effect.gen(function*() {
      const { events } = yield* recordGoal
      const at3 = (answer: LanguageModel.Response) => [script[0], script[1], answer, script[3]] as ReadonlyArray<LanguageModel.Response>
      const cases: ReadonlyArray<readonly [LanguageModel.Response, Eval.Kind]> = [
        [LanguageModel.callTool("append", { line: "z" }), "same_tools"],
        [LanguageModel.callTool("erase", {}), "other_tools"],
        [LanguageModel.text("I would rather not."), "no_action"],
        [LanguageModel.callToolRaw("append", "{not json"), "no_action"],
        [LanguageModel.callTool("nothing_such", {}), "no_action"]
      ]
      for (const [answer, kind] of cases) {
        const report = yield* evaluate(events, at3(answer))
        const differing = report.goals[0]?.steps.filter((s) => s.kind !== "same")
        expect(differing?.map((s) => [s.iteration, s.kind])).toEqual([[3, kind]])
        expect(report.summary.agreement).toBe(3 / 4)
      }
      expect(fs.readFileSync(ledger, "utf8")).toBe("a\nb\n")
    }))

  it.effect("an answer is decoded as a run decodes it: a call written as text is repaired, an invalid input refused by the tool in context", () =>
    Effect.gen(function*() {
      const { events } = yield* recordGoal
      const asText = LanguageModel.text(`{"tool": "append", "input": {"line": "b"}}`)
      const repaired = yield* evaluate(events, [script[0], script[1], asText, script[3]] as ReadonlyArray<LanguageModel.Response>)
      expect(repaired.goals[0]?.steps[2]?.kind).toBe("same")
      const invalid = LanguageModel.callTool("append", { line: 7 })
      const refused = yield* Eval.run([events]).pipe(
        Effect.provide(LanguageModel.layerScripted([script[0], script[1], invalid, script[3]] as ReadonlyArray<LanguageModel.Response>)),
        Effect.provide(ToolRegistry.layer([append, erase]))
      )
      const step = refused.goals[0]?.steps[2]
      expect(step?.kind).toBe("no_action")
      expect(step?.candidate?.rejected.map((r) => [r.kind, r.tool])).toEqual([["invalid_input", "append"]])
      expect(fs.readFileSync(ledger, "utf8")).toBe("a\nb\n")
      // Without the tools, only the name and the JSON are checked: the input is another one.
      const unchecked = yield* evaluate(events, [script[0], script[1], invalid, script[3]] as ReadonlyArray<LanguageModel.Response>)
      expect(unchecked.goals[0]?.steps[2]?.kind).toBe("same_tools")
    }))

  it.effect("a request that fails is reported on its step; the others are still asked", () =>
    Effect.gen(function*() {
      const { events } = yield* recordGoal
      const down: LanguageModel.Step = () => Effect.fail(new LanguageModel.ModelError({ message: "connection refused", server: "http://127.0.0.1:9" }))
      const seen: Array<number> = []
      const report = yield* evaluate(events, [script[0], down, script[2], script[3]] as ReadonlyArray<LanguageModel.Step>, {
        onStep: (_goalId, step) => Effect.sync(() => void seen.push(step.iteration))
      })
      expect(report.goals[0]?.steps.map((s) => [s.iteration, s.kind, s.error])).toEqual([[1, "same", null], [2, "failed", "connection refused"], [3, "same", null], [4, "same", null]])
      expect(report.summary.byKind.failed).toBe(1)
      expect(Eval.passes(report, 0.75)).toBe(true)
      expect(Eval.passes(report, 0.76)).toBe(false)
      expect(seen).toEqual([1, 2, 3, 4])
    }))

  it.effect("requests run concurrently up to the bound; the report keeps the order of the steps", () =>
    Effect.gen(function*() {
      const { events } = yield* recordGoal
      let inFlight = 0
      let most = 0
      // Each answer is chosen by the request (its last message), so the order of asking does not matter.
      const byRequest = (request: LanguageModel.Request) =>
        Effect.gen(function*() {
          inFlight++
          most = Math.max(most, inFlight)
          yield* Effect.yieldNow()
          yield* Effect.yieldNow()
          inFlight--
          const turns = request.messages.filter((m) => m.role === "assistant").length
          return script[turns] as LanguageModel.Response
        })
      const report = yield* Eval.run([events, events], { concurrency: 3 }).pipe(Effect.provide(Layer.succeed(LanguageModel.LanguageModel, { generate: byRequest })))
      expect(most).toBe(3)
      expect(report.summary).toMatchObject({ requests: 8, agreement: 1 })
      expect(report.goals.map((g) => g.steps.map((s) => s.iteration))).toEqual([[1, 2, 3, 4], [1, 2, 3, 4]])
    }))

  it.effect("the report is Schema data: it encodes to JSON and decodes back the same", () =>
    Effect.gen(function*() {
      const { events } = yield* recordGoal
      const report = yield* evaluate(events, script)
      const json = JSON.stringify(Schema.encodeSync(Eval.Report)(report))
      expect(Schema.decodeUnknownSync(Eval.Report)(JSON.parse(json))).toEqual(report)
      expect(Object.keys(JSON.parse(json).summary)).toEqual(["requests", "byKind", "agreement", "usage", "recordedUsage", "durationMs", "msPerRequest"])
    }))
})

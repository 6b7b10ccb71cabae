/** Random scripted runs, for the property tests. */
import { Effect, FastCheck as fc, Layer, Option, Ref } from "effect"
import { TestClock } from "effect"
import { Event, Goal, LanguageModel, Runner, StateStore, ToolRegistry } from "@rx/kernel"
import { echo, flaky, ledgerTool, recordingStore } from "./fixtures.js"

export type Move =
  | { readonly kind: "echo"; readonly text: string }
  | { readonly kind: "append"; readonly line: string }
  /** One answer with several calls: echo, append, and a bad one in the middle. */
  | { readonly kind: "multi"; readonly text: string; readonly line: string }
  | { readonly kind: "flaky" | "fatal" | "badjson" | "unknown" | "invalid" | "text" | "cutoff" | "done" }
  /** The model cannot be reached: the goal suspends, and is resumed. */
  | { readonly kind: "down" }

export const move: fc.Arbitrary<Move> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom("a", "b", "c", "d", "e", "f").map((text): Move => ({ kind: "echo", text })) },
  { weight: 4, arbitrary: fc.constantFrom("x", "y", "z").map((line): Move => ({ kind: "append", line })) },
  { weight: 2, arbitrary: fc.constant<Move>({ kind: "flaky" }) },
  {
    weight: 2,
    arbitrary: fc.record({ text: fc.constantFrom("a", "b"), line: fc.constantFrom("x", "z") }).map(({ line, text }): Move => ({ kind: "multi", text, line }))
  },
  { weight: 1, arbitrary: fc.constantFrom<Move>({ kind: "badjson" }, { kind: "unknown" }, { kind: "invalid" }, { kind: "text" }, { kind: "cutoff" }) },
  { weight: 1, arbitrary: fc.constantFrom<Move>({ kind: "fatal" }, { kind: "done" }) },
  { weight: 1, arbitrary: fc.constant<Move>({ kind: "down" }) }
)

export const script = fc.record({
  moves: fc.array(move, { minLength: 1, maxLength: 24 }),
  maxIterations: fc.integer({ min: 2, max: 30 }),
  /** `append` needs approval: a person approves every line but "z", at hand (no suspension). */
  ask: fc.boolean()
})

/** The approver of scripted runs: deterministic, so a resumed run decides as the uncut one did. */
export const approver: Runner.Approver = (request) =>
  Effect.succeed(Option.some({
    approved: (request.input as { readonly line?: unknown }).line !== "z",
    reason: "z is never approved",
    by: "script"
  }))

const optionsOf = (s: Script) => ({ maxIterations: s.maxIterations, ...(s.ask ? { approval: { append: "ask" as const } } : {}) })
export type Script = typeof script extends fc.Arbitrary<infer A> ? A : never

export const response = (m: Move): LanguageModel.Response => {
  switch (m.kind) {
    case "echo": return LanguageModel.callTool("echo", { text: m.text })
    case "append": return LanguageModel.callTool("append", { line: m.line })
    case "multi":
      return {
        text: "",
        toolCalls: [
          { id: "m0", name: "echo", arguments: JSON.stringify({ text: m.text }) },
          { id: "m1", name: "echo", arguments: "{\"text\": " },
          { id: "m2", name: "append", arguments: JSON.stringify({ line: m.line }) }
        ],
        finishReason: "tool_calls",
        usage: { inputTokens: 0, outputTokens: 0 }
      }
    case "flaky": return LanguageModel.callTool("flaky", {})
    case "fatal": return LanguageModel.callTool("flaky", { fatal: true })
    case "badjson": return LanguageModel.callToolRaw("echo", "{\"text\": ")
    case "unknown": return LanguageModel.callTool("rm_rf", {})
    case "invalid": return LanguageModel.callTool("echo", { txt: 1 })
    case "text": return LanguageModel.text("Let me think about it.")
    case "cutoff": return LanguageModel.text("{\"tool\": \"echo\", \"inp", "length")
    case "done": return LanguageModel.done("finished")
    case "down": return LanguageModel.text("(the server was down)")
  }
}

/** Each answer first moves the test clock, so events carry distinct times. */
export const steps = (moves: ReadonlyArray<Move>): ReadonlyArray<LanguageModel.Step> =>
  moves.map((m) => () =>
    Effect.zipRight(
      TestClock.adjust("7 millis"),
      m.kind === "down" ? Effect.fail(new LanguageModel.ModelError({ message: "the server is down" })) : Effect.succeed(response(m))
    ))

/** Run, then resume while the goal is suspended (the model comes back, a decision is made). */
const toEnd = <E1, E2>(start: Effect.Effect<Goal.Result, E1, Runner.Services>, services: Layer.Layer<Runner.Services, E2>) =>
  Effect.gen(function*() {
    let result = yield* start.pipe(Effect.provide(services))
    while (result.status === "suspended") result = yield* Runner.resume(goalId, { approve: approver }).pipe(Effect.provide(services))
    return result
  })

export const goalId = "prop-goal"

/** Run a script on a fresh memory store: the log, the commit boundaries and the ledger. */
export const record = (s: Script) =>
  Effect.gen(function*() {
    const { boundaries, store } = yield* recordingStore
    const ledger = yield* Ref.make<ReadonlyArray<string>>([])
    const services = Layer.mergeAll(
      Layer.succeed(StateStore.StateStore, store),
      ToolRegistry.layer([echo, flaky, ledgerTool(ledger)]),
      Layer.succeed(LanguageModel.LanguageModel, yield* LanguageModel.makeScripted(steps(s.moves)))
    )
    const result = yield* toEnd(Runner.run({ goal: "property", goalId, options: optionsOf(s), approve: approver }), services)
    const events = yield* store.load(goalId)
    return { result, events, boundaries: [...boundaries], ledger: yield* Ref.get(ledger) }
  })

/**
 * Resume a log cut at `cut` events with the rest of the script. The ledger (the world outside)
 * keeps what completed calls wrote; the result's `ledger` holds only what the resumed run wrote.
 */
export const resumeCut = (s: Script, events: ReadonlyArray<Event.Event>, cut: number, written: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const store = yield* StateStore.makeMemory
    const prefix = events.slice(0, cut)
    yield* store.append(goalId, 0, prefix)
    const answered = prefix.filter((e) => e._tag === "ModelResponded" || e._tag === "ModelFailed").length
    const done = new Set(prefix.flatMap((e) => (e._tag === "ToolSucceeded" ? [e.callId] : [])))
    const before = written.filter((entry) => done.has(entry.slice(0, entry.lastIndexOf(":"))))
    const ledger = yield* Ref.make<ReadonlyArray<string>>(before)
    const services = Layer.mergeAll(
      Layer.succeed(StateStore.StateStore, store),
      ToolRegistry.layer([echo, flaky, ledgerTool(ledger)]),
      Layer.succeed(LanguageModel.LanguageModel, yield* LanguageModel.makeScripted(steps(s.moves.slice(answered))))
    )
    const result = yield* toEnd(Runner.resume(goalId, { approve: approver }), services)
    return { result, events: yield* store.load(goalId), ledger: (yield* Ref.get(ledger)).slice(before.length) }
  })

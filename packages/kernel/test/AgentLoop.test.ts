import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option, Ref, Schema } from "effect"
import { Control, Event, LanguageModel, Prompt, Replay, Runner, State, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { echo, endsOnce, eventsOf, flaky, ledgerTool, tags } from "./fixtures.js"

const { callTool, done } = LanguageModel
const noUsage = { inputTokens: 0, outputTokens: 0 }

/** An answer with several tool calls, as OpenAI-compatible servers send them. */
const calls = (...list: ReadonlyArray<readonly [string, unknown]>): LanguageModel.Response => ({
  text: "",
  toolCalls: list.map(([name, input], i) => ({ id: `c${i}`, name, arguments: typeof input === "string" ? input : JSON.stringify(input) })),
  finishReason: "tool_calls",
  usage: noUsage
})

/** Services over a store, with the ledger tool, echo and flaky. */
const services = (ledger: Ref.Ref<ReadonlyArray<string>>, steps: ReadonlyArray<LanguageModel.Step>) =>
  Layer.mergeAll(ToolRegistry.layer([echo, flaky, ledgerTool(ledger)]), LanguageModel.layerScripted(steps))

/** A step that records the request it answers. */
const capture = (into: Array<LanguageModel.Request>, response: LanguageModel.Response): LanguageModel.Step => (request) =>
  Effect.sync(() => {
    into.push(request)
    return response
  })

describe("Several calls in one answer", () => {
  it.effect("every call runs in order, a bad one among them is rejected alone, and the model sees each result", () => {
    const requests: Array<LanguageModel.Request> = []
    return Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      const result = yield* Runner.run({ goal: "three calls", goalId: "m" }).pipe(
        Effect.provide(services(ledger, [calls(["append", { line: "one" }], ["echo", { txt: 1 }], ["append", { line: "two" }]), capture(requests, done("ok"))]))
      )
      expect(result.reason).toBe("done")
      const events = yield* eventsOf("m")
      expect(tags(events).slice(0, 7)).toEqual([
        "GoalSubmitted", "ModelResponded", "ToolStarted", "ToolSucceeded", "ActionRejected", "ToolStarted", "ToolSucceeded"
      ])
      expect(events.filter((e) => e._tag === "ToolStarted").map((e) => e.callId)).toEqual(["m:1", "m:1:2"])
      expect(events[4]).toMatchObject({ kind: "invalid_input", index: 1, tool: "echo" })
      expect(yield* Ref.get(ledger)).toEqual(["m:1:one", "m:1:2:two"])
      // One iteration, closed once; the prompt after it shows three calls, each with its own result.
      expect(events.filter((e) => e._tag === "IterationCompleted")).toHaveLength(2)
      const messages = requests[0]?.messages ?? []
      const assistant = messages.find((m): m is Extract<LanguageModel.Message, { role: "assistant" }> => m.role === "assistant")
      expect(assistant?.toolCalls.map((c) => c.id)).toEqual(["call_1", "call_1_1", "call_1_2"])
      const results = messages.filter((m): m is Extract<LanguageModel.Message, { role: "tool" }> => m.role === "tool")
      expect(results.map((m) => [m.toolCallId, m.isError === true])).toEqual([["call_1", false], ["call_1_1", true], ["call_1_2", false]])
      expect(results[1]?.content).toContain("invalid input for echo")
      expect(endsOnce(events)).toBe(true)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }).pipe(Effect.provide(StateStore.layerMemory))
  })

  it.effect("calls past maxCallsPerAnswer are not run: one rejection says how many were dropped, and the model is told", () => {
    const requests: Array<LanguageModel.Request> = []
    return Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      const many = calls(["append", { line: "a" }], ["append", { line: "b" }], ["append", { line: "c" }], ["append", { line: "d" }])
      yield* Runner.run({ goal: "many", goalId: "many", options: { maxCallsPerAnswer: 2 } }).pipe(
        Effect.provide(services(ledger, [many, capture(requests, done("ok"))]))
      )
      expect((yield* Ref.get(ledger)).length).toBe(2)
      const events = yield* eventsOf("many")
      const rejected = events.filter((e) => e._tag === "ActionRejected")
      expect(rejected).toHaveLength(1)
      expect(rejected[0]).toMatchObject({ kind: "too_many_calls", dropped: 2, raw: "" })
      expect(rejected[0]).not.toHaveProperty("index")
      expect(rejected[0]?._tag === "ActionRejected" ? rejected[0].reason : "").toContain("made 4 tool calls, but only the first 2")
      // The prompt shows the two calls that ran, each with its result, then a note on the others.
      const messages = requests[0]?.messages ?? []
      expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "user"])
      expect(messages[4]?.content).toContain("the other 2 (calls 3 to 4) were not run")
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }).pipe(Effect.provide(StateStore.layerMemory))
  })

  it.effect("behaviour 2 still rejects each call past maxCallsPerAnswer on its own (its logs keep their rules)", () =>
    Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      yield* Runner.run({ goal: "many", goalId: "many", behaviour: 2, options: { maxCallsPerAnswer: 2 } }).pipe(
        Effect.provide(services(ledger, [calls(["append", { line: "a" }], ["append", { line: "b" }], ["append", { line: "c" }]), done("ok")]))
      )
      expect((yield* Ref.get(ledger)).length).toBe(2)
      expect((yield* eventsOf("many")).find((e) => e._tag === "ActionRejected")).toMatchObject({ kind: "too_many_calls", index: 2 })
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("a crash between two calls of one answer runs neither completed call again", () =>
    Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      const store = yield* StateStore.makeMemory
      const full = yield* Runner.run({ goal: "crash between", goalId: "x" }).pipe(
        Effect.provide(Layer.merge(Layer.succeed(StateStore.StateStore, store), services(ledger, [calls(["append", { line: "a" }], ["append", { line: "b" }]), done("ok")])))
      )
      expect(full.reason).toBe("done")
      const events = yield* store.load("x")
      // Cut right after the first call's outcome: the second call has not started.
      const cut = events.findIndex((e) => e._tag === "ToolSucceeded") + 1
      const resumed = yield* StateStore.makeMemory
      yield* resumed.append("x", 0, events.slice(0, cut))
      const after = yield* Ref.make<ReadonlyArray<string>>(["x:1:a"])
      const result = yield* Runner.resume("x").pipe(
        Effect.provide(Layer.merge(Layer.succeed(StateStore.StateStore, resumed), services(after, [done("ok")])))
      )
      expect(result.reason).toBe("done")
      expect(yield* Ref.get(after)).toEqual(["x:1:a", "x:1:1:b"])
      expect((yield* resumed.load("x")).map((e) => e._tag)).toEqual(events.map((e) => e._tag))
    }))
})

describe("Suspension", () => {
  it.effect("a model that cannot be reached suspends the goal, open; resume continues it; replay verifies", () =>
    Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      const down: LanguageModel.Step = () => Effect.fail(new LanguageModel.ModelError({ message: "cannot reach the server", server: "http://127.0.0.1:1" }))
      const first = yield* Runner.run({ goal: "down", goalId: "d" }).pipe(Effect.provide(services(ledger, [callTool("echo", { text: "a" }), down])))
      expect(first).toMatchObject({ status: "suspended", reason: "model_unavailable" })
      expect((yield* StateStore.StateStore.pipe(Effect.flatMap((s) => s.goal("d")))).pipe(Option.map((g) => g.status))).toEqual(Option.some("open"))
      const second = yield* Runner.resume("d").pipe(Effect.provide(services(ledger, [done("back")])))
      expect(second).toMatchObject({ status: "terminated", reason: "done" })
      const events = yield* eventsOf("d")
      expect(tags(events)).toContain("Suspended")
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("a refused request (401) still ends the goal", () =>
    Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      const refused: LanguageModel.Step = () => Effect.fail(new LanguageModel.ModelError({ message: "HTTP 401", status: 401 }))
      const result = yield* Runner.run({ goal: "refused", goalId: "r" }).pipe(Effect.provide(services(ledger, [refused])))
      expect(result).toMatchObject({ status: "terminated", reason: "fatal_error" })
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.live("a shutdown during a call records the call as unknown and Suspended(shutdown); resume finishes; replay verifies", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const slow = Tool.make({
        name: "slow",
        description: "Takes an hour.",
        input: Schema.Struct({}),
        output: Schema.Struct({}),
        idempotent: false,
        execute: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.as(Effect.never, {}))
      })
      const layer = (steps: ReadonlyArray<LanguageModel.Step>) => Layer.mergeAll(ToolRegistry.layer([slow]), LanguageModel.layerScripted(steps))
      const fiber = yield* Effect.fork(Runner.run({ goal: "stop", goalId: "s" }).pipe(Effect.provide(layer([callTool("slow", {})]))))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      const events = yield* eventsOf("s")
      expect(tags(events).slice(-4)).toEqual(["ToolStarted", "ToolFailed", "IterationCompleted", "Suspended"])
      expect(events.at(-1)).toMatchObject({ reason: "shutdown" })
      expect(events.at(-3)).toMatchObject({ error: { kind: "unknown" } })
      const result = yield* Runner.resume("s").pipe(Effect.provide(layer([done("ok")])))
      expect(result.reason).toBe("done")
      expect((yield* Replay.verify(yield* eventsOf("s"))).reason).toBe("done")
    }).pipe(Effect.provide(StateStore.layerMemory)))
})

describe("Approvals", () => {
  const ask = { approval: { append: "ask" as const } }

  it.effect("a call that needs approval waits, recorded; approved from elsewhere, it runs exactly as stored, with no new model call", () =>
    Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      const first = yield* Runner.run({ goal: "ask", goalId: "a", options: ask }).pipe(Effect.provide(services(ledger, [callTool("append", { line: "risky" })])))
      expect(first).toMatchObject({ status: "suspended", reason: "awaiting_approval" })
      expect(yield* Ref.get(ledger)).toEqual([])
      // Resuming without a decision appends nothing more.
      const before = (yield* eventsOf("a")).length
      yield* Runner.resume("a").pipe(Effect.provide(services(ledger, [])))
      expect((yield* eventsOf("a")).length).toBe(before)
      expect(yield* Control.approve("a", "alice")).toBe("decided")
      const requests: Array<LanguageModel.Request> = []
      const result = yield* Runner.resume("a").pipe(Effect.provide(services(ledger, [capture(requests, done("ok"))])))
      expect(result.reason).toBe("done")
      expect(yield* Ref.get(ledger)).toEqual(["a:1:risky"])
      expect(requests).toHaveLength(1)
      const events = yield* eventsOf("a")
      expect(tags(events)).toEqual([
        "GoalSubmitted", "ModelResponded", "ApprovalRequested", "Suspended", "ApprovalDecided", "ToolStarted", "ToolSucceeded",
        "IterationCompleted", "ModelResponded", "IterationCompleted", "Terminated"
      ])
      expect(events[4]).toMatchObject({ approved: true, by: "alice", callId: "a:1" })
      expect((yield* Replay.verify(events)).reason).toBe("done")
      // A changed decision is a divergence at its consequence.
      const flipped = events.map((e): Event.Event => (e._tag === "ApprovalDecided" ? { ...e, approved: false } : e))
      const error = yield* Effect.flip(Replay.verify(flipped))
      expect(error._tag).toBe("@rx/kernel/NonDeterminism")
      if (error._tag === "@rx/kernel/NonDeterminism") expect(error.seq).toBe(5)
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("a denied call never runs and the model is told why; deny policy never asks", () =>
    Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      yield* Runner.run({ goal: "deny", goalId: "n", options: ask }).pipe(Effect.provide(services(ledger, [callTool("append", { line: "x" })])))
      expect(yield* Control.deny("n", "bob", "not on Fridays")).toBe("decided")
      const requests: Array<LanguageModel.Request> = []
      yield* Runner.resume("n").pipe(Effect.provide(services(ledger, [capture(requests, done("ok"))])))
      expect(yield* Ref.get(ledger)).toEqual([])
      expect(requests[0]?.messages.at(-1)).toMatchObject({ role: "tool", isError: true })
      expect(requests[0]?.messages.at(-1)?.content).toContain("denied by bob: not on Fridays")
      const policy = yield* Runner.run({ goal: "never", goalId: "p", options: { approval: { append: "deny" } } }).pipe(
        Effect.provide(services(ledger, [callTool("append", { line: "x" }), done("ok")]))
      )
      expect(policy.reason).toBe("done")
      expect((yield* eventsOf("p")).find((e) => e._tag === "ActionRejected")).toMatchObject({ kind: "denied" })
      expect(yield* Ref.get(ledger)).toEqual([])
      expect((yield* Replay.verify(yield* eventsOf("n"))).reason).toBe("done")
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("an approver at hand (a terminal) decides in place: no suspension", () =>
    Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      const result = yield* Runner.run({
        goal: "in place",
        goalId: "t",
        options: ask,
        approve: (request) => Effect.succeed(Option.some({ approved: request.tool === "append", reason: "ok", by: "terminal" }))
      }).pipe(Effect.provide(services(ledger, [callTool("append", { line: "y" }), done("ok")])))
      expect(result.reason).toBe("done")
      const events = yield* eventsOf("t")
      expect(tags(events)).not.toContain("Suspended")
      expect(yield* Ref.get(ledger)).toEqual(["t:1:y"])
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }).pipe(Effect.provide(StateStore.layerMemory)))
})

describe("A person's decision", () => {
  it.effect("is kept when another event lands while the person decides (\"always\": an options change first)", () =>
    Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      const asked = yield* Ref.make(0)
      const always: Runner.Approver = (request) =>
        Effect.gen(function*() {
          yield* Ref.update(asked, (n) => n + 1)
          yield* Control.changeOptions("k2", (o) => ({ ...o, approval: { ...o.approval, [request.tool]: "auto" as const } }))
          return Option.some({ approved: true, reason: "always", by: "terminal" })
        }).pipe(Effect.orDie, Effect.provideService(StateStore.StateStore, store))
      const result = yield* Runner.run({ goal: "always", goalId: "k2", options: { approval: { append: "ask" } }, approve: always }).pipe(
        Effect.provide(services(ledger, [callTool("append", { line: "one" }), callTool("append", { line: "two" }), done("ok")]))
      )
      expect(result.reason).toBe("done")
      expect(yield* Ref.get(asked)).toBe(1)
      expect(yield* Ref.get(ledger)).toEqual(["k2:1:one", "k2:2:two"])
      const events = yield* eventsOf("k2")
      expect(tags(events).filter((t) => t === "ApprovalDecided")).toHaveLength(1)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }).pipe(Effect.provide(StateStore.layerMemory)))
})

describe("Instructions and limits", () => {
  it.effect("instructions are recorded and shown with the goal in every prompt", () => {
    const requests: Array<LanguageModel.Request> = []
    return Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      yield* Runner.run({ goal: "g", goalId: "i", instructions: "Use tabs." }).pipe(Effect.provide(services(ledger, [capture(requests, done("ok"))])))
      const events = yield* eventsOf("i")
      expect(events[0]).toMatchObject({ instructions: "Use tabs." })
      expect(requests[0]?.messages[0]?.content).toContain("Instructions:\nUse tabs.")
      expect(Prompt.build(State.fromEvents("i", events.slice(0, 1))).messages[0]?.content).toContain("Use tabs.")
    }).pipe(Effect.provide(StateStore.layerMemory))
  })

  it.effect("a raised iteration limit on an open goal is recorded and followed", () =>
    Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      const down: LanguageModel.Step = () => Effect.fail(new LanguageModel.ModelError({ message: "down" }))
      yield* Runner.run({ goal: "limit", goalId: "l", options: { maxIterations: 1 } }).pipe(Effect.provide(services(ledger, [down])))
      expect(yield* Control.changeOptions("l", (o) => ({ ...o, maxIterations: 3 }))).toBe("changed")
      const result = yield* Runner.resume("l").pipe(
        Effect.provide(services(ledger, [callTool("echo", { text: "1" }), callTool("echo", { text: "2" }), callTool("echo", { text: "3" }), done("no")]))
      )
      expect(result.reason).toBe("max_iterations")
      expect(result.iterations).toBe(3)
      expect((yield* Replay.verify(yield* eventsOf("l"))).reason).toBe("max_iterations")
    }).pipe(Effect.provide(StateStore.layerMemory)))
})

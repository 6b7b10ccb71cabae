import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, Layer, Ref, Schema } from "effect"
import { Control, Event, LanguageModel, Options, Prompt, Replay, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { echo, endsOnce, eventsOf, flaky, layers, runGoal, tags } from "./fixtures.js"

const { callTool, callToolRaw, done, text } = LanguageModel

/** A step that records the request it answers. */
const capture = (into: Array<LanguageModel.Request>, response: LanguageModel.Response): LanguageModel.Step => (request) =>
  Effect.sync(() => {
    into.push(request)
    return response
  })

describe("Runner: termination", () => {
  it.effect("done: the model's own action ends the run with its summary", () =>
    Effect.gen(function*() {
      const { events, result } = yield* runGoal("say hi")
      expect(result).toMatchObject({ reason: "done", detail: "said hi", iterations: 2 })
      expect(tags(events)).toEqual([
        "GoalSubmitted", "ModelResponded", "ToolStarted", "ToolSucceeded", "IterationCompleted",
        "ModelResponded", "IterationCompleted", "Terminated"
      ])
      expect(events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    }).pipe(Effect.provide(layers([callTool("echo", { text: "hi" }), done("said hi")]))))

  it.effect("max_iterations is enforced before the model is asked again", () =>
    Effect.gen(function*() {
      // Only two answers are scripted: a third request would end as fatal_error instead.
      const { events, result } = yield* runGoal("loop", { maxIterations: 2 })
      expect(result.reason).toBe("max_iterations")
      expect(result.detail).toContain("2 iterations")
      expect(events.filter((e) => e._tag === "ModelResponded")).toHaveLength(2)
      expect(endsOnce(events)).toBe(true)
    }).pipe(Effect.provide(layers([callTool("echo", { text: "1" }), callTool("echo", { text: "2" })]))))

  it.effect("fatal_error: a fatal tool error ends the run", () =>
    Effect.gen(function*() {
      const { events, result } = yield* runGoal("break")
      expect(result.reason).toBe("fatal_error")
      expect(result.detail).toContain("the disk is gone")
      expect(tags(events).slice(-3)).toEqual(["ToolFailed", "IterationCompleted", "Terminated"])
    }).pipe(Effect.provide(layers([callTool("flaky", { fatal: true }), done("never reached")]))))

  it.effect("fatal_error: a model that cannot answer ends the run with its message", () =>
    Effect.gen(function*() {
      const { events, result } = yield* runGoal("no model")
      expect(result.reason).toBe("fatal_error")
      expect(result.detail).toBe("the model failed: the scripted model has no further answer")
      expect(tags(events)).toEqual(["GoalSubmitted", "ModelFailed", "Terminated"])
      expect((yield* Replay.verify(events)).detail).toBe(result.detail)
    }).pipe(Effect.provide(layers([]))))

  it.effect("repeated_failure: recoverable failures in a row past the threshold", () => {
    const requests: Array<LanguageModel.Request> = []
    return Effect.gen(function*() {
      const { events, result } = yield* runGoal("fail", { maxConsecutiveFailures: 3, maxRepeats: 10 })
      expect(result.reason).toBe("repeated_failure")
      expect(events.filter((e) => e._tag === "ToolFailed")).toHaveLength(3)
      // The model saw the error of its previous call, as a tool result.
      const last = requests[0]?.messages.at(-1)
      expect(last).toMatchObject({ role: "tool", toolCallId: "call_1", content: "recoverable error: file not found: a.txt" })
      expect(endsOnce(events)).toBe(true)
    }).pipe(Effect.provide(layers([callTool("flaky", {}), capture(requests, callTool("flaky", {})), callTool("flaky", {})])))
  })

  it.effect("a recoverable failure goes back to the model, which recovers", () => {
    const requests: Array<LanguageModel.Request> = []
    return Effect.gen(function*() {
      const { result } = yield* runGoal("fail once")
      expect(result.reason).toBe("done")
      const after = requests[0]?.messages.at(-1)
      expect(after).toMatchObject({ role: "tool", name: "flaky", content: "recoverable error: file not found: a.txt", isError: true })
    }).pipe(Effect.provide(layers([callTool("flaky", {}), capture(requests, callTool("echo", { text: "ok" })), done("ok")])))
  })

  it.effect("malformed_output: answers that are never actions", () =>
    Effect.gen(function*() {
      const { events, result } = yield* runGoal("talk", { maxMalformed: 3 })
      expect(result.reason).toBe("malformed_output")
      expect(events.filter((e) => e._tag === "ActionRejected")).toHaveLength(3)
      expect(endsOnce(events)).toBe(true)
    }).pipe(Effect.provide(layers([text("hmm"), text("let me see"), text("I will now"), done("never")]))))

  it.effect("no_progress: the same call with the same result", () =>
    Effect.gen(function*() {
      const { result } = yield* runGoal("repeat", { maxRepeats: 3 })
      expect(result.reason).toBe("no_progress")
      expect(result.detail).toContain("same result 3 times")
      expect(result.iterations).toBe(3)
    }).pipe(Effect.provide(layers(Array.from({ length: 5 }, () => callTool("echo", { text: "same" }))))))

  it.effect("no_progress: a window of iterations with no successful call", () =>
    Effect.gen(function*() {
      const { result } = yield* runGoal("idle", { noProgressWindow: 4, maxConsecutiveFailures: 10, maxMalformed: 10, maxRepeats: 10 })
      expect(result.reason).toBe("no_progress")
      expect(result.detail).toContain("4 iterations without a successful tool call")
    }).pipe(Effect.provide(layers([callTool("flaky", {}), text("?"), callTool("flaky", {}), text("?"), done("never")]))))

  it.effect("invalid options are refused before anything is recorded", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Runner.run({ goal: "x", goalId: "bad", options: { maxIterations: 0 } }))
      expect(error._tag).toBe("@rx/kernel/InvalidOptions")
      expect(error.message).toContain("maxIterations")
      expect(yield* eventsOf("bad")).toEqual([])
    }).pipe(Effect.provide(layers([]))))
})

describe("Runner: goals it refuses", () => {
  const refused = (goal: string, options: Options.Input = {}) =>
    Effect.gen(function*() {
      const observed: Array<Event.Event> = []
      const observe = (event: Event.Event) => Effect.sync(() => void observed.push(event))
      const submitted = yield* Effect.flip(Runner.submit({ goal, goalId: "refused", options, observe }))
      const ran = yield* Effect.flip(Runner.run({ goal, goalId: "refused", options, observe }))
      const store = yield* StateStore.StateStore
      // Nothing recorded: no event, no goal listed, nothing observed.
      expect(yield* eventsOf("refused")).toEqual([])
      expect(yield* store.goals()).toEqual([])
      expect(observed).toEqual([])
      expect(ran).toEqual(submitted)
      return submitted
    }).pipe(Effect.provide(layers([done("never asked")])))

  it.effect("an empty or whitespace-only goal is InvalidGoal", () =>
    Effect.gen(function*() {
      for (const goal of ["", "  \n", "\t"]) {
        const error = yield* refused(goal)
        expect(error._tag).toBe("@rx/kernel/InvalidGoal")
        expect(error).toMatchObject({ reason: "empty", message: "the goal is empty: say what to achieve" })
      }
    }))

  it.effect("a goal longer than a prompt shows of it is InvalidGoal, naming its length, the limit and promptBudget", () =>
    Effect.gen(function*() {
      const limit = Prompt.maxGoalChars(Options.defaults)
      expect(limit).toBe(8_000)
      const error = yield* refused("x".repeat(limit + 1))
      expect(error).toMatchObject({ _tag: "@rx/kernel/InvalidGoal", reason: "too_long" })
      expect(error.message).toBe(
        "the goal is 8001 characters long, more than the 8000 a prompt shows of it with promptBudget 32000: shorten it (put the details in a file the agent reads), or raise promptBudget, which raises the limit (a quarter of it)"
      )
      // The limit follows the options: a smaller budget shows less.
      expect(Prompt.maxGoalChars({ promptBudget: 4_000 })).toBe(1_000)
      expect((yield* refused("y".repeat(1_001), { promptBudget: 4_000 })).message).toContain("1001 characters long, more than the 1000")
      // A goal of exactly the limit runs, and the prompt shows it whole.
      const requests: Array<LanguageModel.Request> = []
      const goal = "z".repeat(limit)
      const result = yield* Effect.provide(Runner.run({ goal, goalId: "full" }), layers([capture(requests, done("ok"))]))
      expect(result.reason).toBe("done")
      expect(requests[0]?.messages[0]?.content).toBe(`Goal:\n${goal}`)
    }))
})

describe("Runner: malformed answers", () => {
  it.effect("each kind is rejected with a reason the model sees, then the run recovers", () => {
    const requests: Array<LanguageModel.Request> = []
    return Effect.gen(function*() {
      const { events, result } = yield* runGoal("recover", { maxMalformed: 10 })
      expect(result.reason).toBe("done")
      const rejected = events.filter((e): e is Event.Of<"ActionRejected"> => e._tag === "ActionRejected")
      expect(rejected.map((e) => e.kind)).toEqual(["bad_json", "unknown_tool", "invalid_input", "no_action", "cut_off", "bad_json"])
      expect(rejected[1]?.reason).toContain("available tools: echo, flaky, done")
      expect(rejected[2]?.reason).toContain("text")
      // The request after each rejection ends with the reason: the rejected call's own result,
      // or a user message when the answer as a whole was not executed.
      for (const [i, request] of requests.entries()) {
        const last = request.messages.at(-1)
        expect(last?.role).toBe(rejected[i]?.index === undefined ? "user" : "tool")
        expect(last?.content).toContain(rejected[i]?.reason)
      }
      // The JSON action in text (fenced) was executed.
      expect(events.find((e) => e._tag === "ToolStarted")).toMatchObject({ tool: "echo", input: { text: "fenced" } })
    }).pipe(Effect.provide(layers([
      callToolRaw("echo", "{\"text\": "),
      capture(requests, callTool("rm_rf", { path: "/" })),
      capture(requests, callTool("echo", { txt: 1 })),
      capture(requests, text("I would call echo now.")),
      capture(requests, text("{\"tool\": \"echo\", \"input\": {", "length")),
      capture(requests, text("{\"tool\": \"echo\", \"input\": [1]}")),
      capture(requests, text("```json\n{\"tool\": \"echo\", \"input\": {\"text\": \"fenced\"}, \"thought\": \"t\"}\n```")),
      done("recovered")
    ])))
  })
})

/** A non-idempotent tool that says when it started, then takes an hour. */
const hourLong = (started: Deferred.Deferred<void>) =>
  Tool.make({
    name: "slow",
    description: "Takes an hour.",
    input: Schema.Struct({}),
    output: Schema.Struct({}),
    idempotent: false,
    execute: () => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Effect.sleep("1 hour")), Effect.as({}))
  })

describe("Runner: cancellation", () => {
  it.effect("during a model call: the call is interrupted and the log ends CancelRequested, Terminated", () =>
    Effect.gen(function*() {
      const asked = yield* Deferred.make<void>()
      const interrupted = yield* Ref.make(false)
      const slow: LanguageModel.Step = () =>
        Deferred.succeed(asked, undefined).pipe(
          Effect.zipRight(Effect.sleep("1 hour")),
          Effect.onInterrupt(() => Ref.set(interrupted, true)),
          Effect.as(done("too late"))
        )
      const fiber = yield* Effect.fork(Runner.run({ goal: "wait", goalId: "c1" }).pipe(
        Effect.provide(Layer.mergeAll(ToolRegistry.layer([echo]), LanguageModel.layerScripted([callTool("echo", { text: "a" }), slow])))
      ))
      yield* Deferred.await(asked)
      expect(yield* Control.cancel("c1", "user pressed Ctrl-C")).toBe("requested")
      const result = yield* Fiber.join(fiber)
      expect(result).toMatchObject({ reason: "cancelled", detail: "user pressed Ctrl-C" })
      expect(yield* Ref.get(interrupted)).toBe(true)
      const events = yield* eventsOf("c1")
      expect(tags(events).slice(-3)).toEqual(["IterationCompleted", "CancelRequested", "Terminated"])
      expect(yield* Control.cancel("c1")).toBe("already_terminated")
      expect((yield* Replay.verify(events)).reason).toBe("cancelled")
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("during a tool call: the tool is interrupted and its outcome recorded as unknown", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const slowTool = hourLong(started)
      const fiber = yield* Effect.fork(Runner.run({ goal: "wait", goalId: "c2" }).pipe(
        Effect.provide(Layer.mergeAll(ToolRegistry.layer([slowTool]), LanguageModel.layerScripted([callTool("slow", {}), done("x")])))
      ))
      yield* Deferred.await(started)
      yield* Control.cancel("c2")
      const result = yield* Fiber.join(fiber)
      expect(result.reason).toBe("cancelled")
      const events = yield* eventsOf("c2")
      expect(tags(events)).toEqual([
        "GoalSubmitted", "ModelResponded", "ToolStarted", "CancelRequested", "ToolFailed", "IterationCompleted", "Terminated"
      ])
      expect(events[4]).toMatchObject({ _tag: "ToolFailed", error: { kind: "unknown" } })
      expect((yield* Replay.verify(events)).reason).toBe("cancelled")
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.live("a store that fails to follow the log at first: the watcher follows it again, and a cancel still ends the call in flight", () =>
    Effect.gen(function*() {
      const memory = yield* StateStore.makeMemory
      let failures = 0
      const failing: StateStore.StateStore["Type"] = {
        ...memory,
        first: (goalId, fromSeq, kinds) =>
          failures++ < 3 ? new StateStore.StoreError({ message: "connection lost" }) : StateStore.first(memory, goalId, fromSeq, kinds)
      }
      const started = yield* Deferred.make<void>()
      const slowTool = hourLong(started)
      yield* Effect.gen(function*() {
        const fiber = yield* Effect.fork(Runner.run({ goal: "wait", goalId: "c-flaky" }).pipe(
          Effect.provide(Layer.mergeAll(ToolRegistry.layer([slowTool]), LanguageModel.layerScripted([callTool("slow", {}), done("x")])))
        ))
        yield* Deferred.await(started)
        yield* Control.cancel("c-flaky")
        const result = yield* Fiber.join(fiber).pipe(Effect.timeout("10 seconds"))
        expect(result.reason).toBe("cancelled")
        expect(failures).toBeGreaterThan(3)
        expect(tags(yield* eventsOf("c-flaky"))).toEqual([
          "GoalSubmitted", "ModelResponded", "ToolStarted", "CancelRequested", "ToolFailed", "IterationCompleted", "Terminated"
        ])
      }).pipe(Effect.provideService(StateStore.StateStore, failing))
    }))

  it.effect("a goal with a pending cancel request is cancelled when resumed", () =>
    Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      const { events } = yield* runGoal("x", { maxIterations: 1 })
      // Re-create the log without its end, as if the process died, then cancel it.
      yield* store.append("g2", 0, events.slice(0, 5).map((e) => ({ ...e, goalId: "g2" })))
      yield* Control.cancel("g2", "not needed any more")
      const result = yield* Runner.resume("g2")
      expect(result).toMatchObject({ reason: "cancelled", detail: "not needed any more" })
    }).pipe(Effect.provide(layers([callTool("echo", { text: "1" })]))))
})

describe("Runner: one runner per goal", () => {
  it.effect("a second runner on the same goal stops with GoalBusy and the log stays contiguous", () =>
    Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      const { events } = yield* runGoal("x", { maxIterations: 3 })
      const open = events.slice(0, 5)
      yield* store.append("g3", 0, open.map((e) => ({ ...e, goalId: "g3" })))
      // Another runner appends first, while this one is asking the model.
      const racing: LanguageModel.Step = () =>
        store.append("g3", 5, [{ ...(open[1] as Event.Event), goalId: "g3", seq: 5, iteration: 2 }]).pipe(
          Effect.orDie,
          Effect.as(callTool("echo", { text: "mine" }))
        )
      const error = yield* Effect.flip(Runner.resume("g3").pipe(
        Effect.provide(Layer.mergeAll(ToolRegistry.layer([echo]), LanguageModel.layerScripted([racing])))
      ))
      expect(error._tag).toBe("@rx/kernel/GoalBusy")
      expect(error.message).toContain("being run elsewhere")
      const log = yield* store.load("g3")
      expect(log.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5])
    }).pipe(Effect.provide(layers([callTool("echo", { text: "1" }), callTool("echo", { text: "2" }), callTool("echo", { text: "3" })]))))

  it.effect("a runner resuming while another is inside a tool call stops at once; the call is not treated as a crash", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const slowTool = Tool.make({
        name: "slow",
        description: "Waits to be released.",
        input: Schema.Struct({}),
        output: Schema.Struct({ finished: Schema.Boolean }),
        idempotent: true,
        execute: () => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Deferred.await(release)), Effect.as({ finished: true }))
      })
      const services = Layer.mergeAll(ToolRegistry.layer([slowTool]), LanguageModel.layerScripted([callTool("slow", {}), done("ok")]))
      const first = yield* Effect.fork(Runner.run({ goal: "x", goalId: "lease-1" }).pipe(Effect.provide(services)))
      yield* Deferred.await(started)
      const second = yield* Effect.flip(Runner.resume("lease-1").pipe(Effect.provide(services)))
      expect(second._tag).toBe("@rx/kernel/GoalBusy")
      expect(second.message).toContain("being run elsewhere")
      yield* Deferred.succeed(release, undefined)
      expect((yield* Fiber.join(first)).reason).toBe("done")
      const events = yield* eventsOf("lease-1")
      expect(events.filter((e) => e._tag === "ToolFailed")).toEqual([])
      expect(tags(events)).toEqual([
        "GoalSubmitted", "ModelResponded", "ToolStarted", "ToolSucceeded", "IterationCompleted", "ModelResponded", "IterationCompleted", "Terminated"
      ])
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("resuming an unknown goal is GoalNotFound; resuming a finished one appends nothing", () =>
    Effect.gen(function*() {
      expect((yield* Effect.flip(Runner.resume("nope")))._tag).toBe("@rx/kernel/GoalNotFound")
      const { events, result } = yield* runGoal("x")
      const again = yield* Runner.resume(result.goalId)
      expect(again.reason).toBe(result.reason)
      expect(yield* eventsOf(result.goalId)).toHaveLength(events.length)
    }).pipe(Effect.provide(layers([done("at once")]))))
})

describe("ToolRegistry", () => {
  it.effect("an empty registry requires nothing", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry.make([])
      expect(registry.specs).toEqual([])
    }))

  it.effect("refuses duplicate, reserved and invalid names", () =>
    Effect.gen(function*() {
      const dup = yield* Effect.flip(ToolRegistry.make([echo, echo]))
      expect(dup.message).toContain("two tools are named \"echo\"")
      const reserved = Tool.make({ ...echoDefinition, name: "done" })
      expect((yield* Effect.flip(ToolRegistry.make([reserved]))).message).toContain("kernel's own action")
      const bad = Tool.make({ ...echoDefinition, name: "has space" })
      expect((yield* Effect.flip(ToolRegistry.make([bad]))).message).toContain("invalid")
    }))

  it.effect("turns a tool defect into a fatal failure and keeps the input Schema's message", () =>
    Effect.gen(function*() {
      const crashing = Tool.make({ ...echoDefinition, name: "crash", execute: () => Effect.die(new Error("boom")) })
      const registry = yield* ToolRegistry.make([crashing, flaky])
      const outcome = yield* ToolRegistry.invoke(registry, { callId: "c", tool: "crash", input: { text: "x" } })
      expect(outcome).toEqual({ _tag: "Failure", error: { kind: "fatal", message: "tool crash crashed: boom" } })
      expect(Either.isLeft(registry.prepare({ callId: "c", tool: "crash", input: { text: 1 } }))).toBe(true)
      expect(registry.specs[0]?.parameters).toMatchObject({ type: "object", required: ["text"] })
    }))
})

const echoDefinition = {
  name: "echo",
  description: "Echo.",
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.Struct({ text: Schema.String }),
  idempotent: true,
  execute: ({ text }: { readonly text: string }) => Effect.succeed({ text })
}

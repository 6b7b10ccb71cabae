/**
 * What the kernel knows of sub-goals (behaviour 4), with plain tools standing in for `delegate`
 * (which lives in @rx/tools): a call that waits suspends its goal with the call started, a call's
 * usage counts toward the budget, a shutdown leaves an idempotent call started, a cancel asks the
 * cut call's `recover`, and a cancel reaches a goal's sub-goals. Behaviour 3 logs keep their rules.
 */
import { describe, expect, it } from "@effect/vitest"
import { Control, Event, LanguageModel, Replay, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Deferred, Effect, Either, Fiber, Layer, Option, Ref, Schema } from "effect"
import { eventsOf, tags } from "./fixtures.js"

const { callTool, done } = LanguageModel

/** A tool whose calls wait while `waiting` holds, then succeed, reporting what they spent. */
const gate = (waiting: Ref.Ref<boolean>, idempotent = true): Tool.Tool => {
  const base = Tool.make({ name: "gate", description: "Wait for the gate.", input: Schema.Struct({}), output: Schema.Struct({}), idempotent, execute: () => Effect.succeed({}) })
  return {
    ...base,
    run: () =>
      Effect.map(Ref.get(waiting), (wait): Tool.Outcome =>
        wait
          ? { _tag: "Waiting", reason: "awaiting_approval", detail: "sub-goal g.1 waits for a person", child: "g.1" }
          : { _tag: "Success", output: { opened: true }, usage: { inputTokens: 40, outputTokens: 2 } })
  }
}

const layer = (tools: ReadonlyArray<Tool.Tool>, steps: ReadonlyArray<LanguageModel.Step>) =>
  Layer.mergeAll(ToolRegistry.layer(tools), LanguageModel.layerScripted(steps))

describe("Sub-goals in the kernel (behaviour 4)", () => {
  it.effect("a call that waits suspends the goal with the call started, naming the sub-goal; a resume runs it again; replay verifies", () =>
    Effect.gen(function*() {
      const waiting = yield* Ref.make(true)
      const first = yield* Runner.run({ goal: "wait", goalId: "g" }).pipe(Effect.provide(layer([gate(waiting)], [callTool("gate", {})])))
      expect(first).toMatchObject({ status: "suspended", reason: "awaiting_approval", detail: "sub-goal g.1 waits for a person" })
      const events = yield* eventsOf("g")
      expect(tags(events)).toEqual(["GoalSubmitted", "ModelResponded", "ToolStarted", "Suspended"])
      expect(events.at(-1)).toMatchObject({ child: "g.1" })
      expect(first.state.pending).toMatchObject({ callId: "g:1" })
      // Still waiting: nothing more is recorded.
      yield* Runner.resume("g").pipe(Effect.provide(layer([gate(waiting)], [])))
      expect((yield* eventsOf("g")).length).toBe(events.length)
      yield* Ref.set(waiting, false)
      const end = yield* Runner.resume("g").pipe(Effect.provide(layer([gate(waiting)], [done("through")])))
      expect(end).toMatchObject({ status: "terminated", reason: "done" })
      const log = yield* eventsOf("g")
      expect(tags(log).slice(3)).toEqual(["Suspended", "ToolSucceeded", "IterationCompleted", "ModelResponded", "IterationCompleted", "Terminated"])
      expect(log.filter((e) => e._tag === "ToolStarted")).toHaveLength(1)
      expect((yield* Replay.verify(log)).reason).toBe("done")
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("a call's usage is recorded and counts toward maxTotalTokens; replay checks it", () =>
    Effect.gen(function*() {
      const open = yield* Ref.make(false)
      const result = yield* Runner.run({ goal: "spend", goalId: "u", options: { maxTotalTokens: 42 } }).pipe(
        Effect.provide(layer([gate(open)], [callTool("gate", {}), done("never asked")]))
      )
      expect(result).toMatchObject({ status: "terminated", reason: "token_budget", detail: "the run used 42 tokens (limit 42)" })
      const log = yield* eventsOf("u")
      expect(log.find((e) => e._tag === "ToolSucceeded")).toMatchObject({ usage: { inputTokens: 40, outputTokens: 2 } })
      expect((yield* Replay.verify(log)).reason).toBe("token_budget")
      // A changed usage is a divergence.
      const changed = log.map((e) => (e._tag === "ToolSucceeded" ? { ...e, usage: { inputTokens: 1, outputTokens: 0 } } : e))
      expect(Either.isLeft(yield* Effect.either(Replay.verify(changed)))).toBe(true)
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("only an idempotent tool's call may wait: another's wait is a recorded failure", () =>
    Effect.gen(function*() {
      const waiting = yield* Ref.make(true)
      const result = yield* Runner.run({ goal: "wait", goalId: "n" }).pipe(Effect.provide(layer([gate(waiting, false)], [callTool("gate", {}), done("ok")])))
      expect(result.reason).toBe("done")
      expect((yield* eventsOf("n")).find((e) => e._tag === "ToolFailed")).toMatchObject({ error: { kind: "recoverable", message: expect.stringContaining("only an idempotent tool's call may wait") } })
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.live("a shutdown leaves an idempotent call started (the resume runs it again), where behaviour 3 recorded it as unknown", () =>
    Effect.gen(function*() {
      const run = (goalId: string, behaviour: number) =>
        Effect.gen(function*() {
          const started = yield* Deferred.make<void>()
          const slow = Tool.make({
            name: "slow", description: "Takes a while.", input: Schema.Struct({}), output: Schema.Struct({ ok: Schema.Boolean }), idempotent: true,
            execute: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
          })
          const fiber = yield* Effect.fork(Runner.run({ goal: "stop", goalId, behaviour }).pipe(Effect.provide(layer([slow], [callTool("slow", {})]))))
          yield* Deferred.await(started)
          yield* Fiber.interrupt(fiber)
          const quick = Tool.make({ name: "slow", description: "Quick now.", input: Schema.Struct({}), output: Schema.Struct({ ok: Schema.Boolean }), idempotent: true, execute: () => Effect.succeed({ ok: true }) })
          yield* Runner.resume(goalId).pipe(Effect.provide(layer([quick], [done("ok")])))
          const log = yield* eventsOf(goalId)
          expect((yield* Replay.verify(log)).reason).toBe("done")
          return log
        })
      const now = yield* run("s4", 4)
      expect(tags(now).slice(2, 5)).toEqual(["ToolStarted", "Suspended", "ToolSucceeded"])
      const before = yield* run("s3", 3)
      expect(tags(before).slice(2, 6)).toEqual(["ToolStarted", "ToolFailed", "IterationCompleted", "Suspended"])
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.live("a call cut short by a cancel is asked to recover even when idempotent, and its answer is the call's outcome", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const base = Tool.make({ name: "child", description: "Runs a sub-goal.", input: Schema.Struct({}), output: Schema.Struct({ ended: Schema.String }), idempotent: true, execute: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never) })
      const child: Tool.Tool = { ...base, recover: () => Effect.succeed(Option.some({ _tag: "Success", output: { ended: "cancelled with its parent" } })) }
      const fiber = yield* Effect.fork(Runner.run({ goal: "cut", goalId: "c" }).pipe(Effect.provide(layer([child], [callTool("child", {})]))))
      yield* Deferred.await(started)
      yield* Control.cancel("c")
      expect(yield* Fiber.join(fiber)).toMatchObject({ status: "terminated", reason: "cancelled" })
      const log = yield* eventsOf("c")
      expect(log.find((e) => e._tag === "ToolSucceeded")).toMatchObject({ output: { ended: "cancelled with its parent" } })
      expect((yield* Replay.verify(log)).reason).toBe("cancelled")
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("a sub-goal's GoalSubmitted names its parent; cancelling a goal cancels its open sub-goals and theirs, not ended ones", () =>
    Effect.gen(function*() {
      const tools = layer([Tool.echo], [])
      const submit = (goalId: string, parent?: Event.Parent) => Runner.submit({ goal: goalId, goalId, ...(parent === undefined ? {} : { parent }) }).pipe(Effect.provide(tools))
      yield* submit("root")
      yield* submit("root.1", { goalId: "root", callId: "root:1", depth: 1 })
      yield* submit("root.2", { goalId: "root", callId: "root:2", depth: 1 })
      yield* submit("root.1.1", { goalId: "root.1", callId: "root.1:1", depth: 2 })
      yield* submit("other")
      expect((yield* eventsOf("root.1.1"))[0]).toMatchObject({ parent: { goalId: "root.1", callId: "root.1:1", depth: 2 } })
      yield* Control.cancel("root.2", "ended first")
      yield* Runner.resume("root.2").pipe(Effect.provide(tools))
      expect(yield* Control.cancel("root", "stop the tree")).toBe("requested")
      const cancel = (goalId: string) => Effect.map(eventsOf(goalId), (events) => events.filter((e) => e._tag === "CancelRequested").map((e) => e._tag === "CancelRequested" ? e.reason : ""))
      expect(yield* cancel("root")).toEqual(["stop the tree"])
      expect(yield* cancel("root.1")).toEqual(["its parent goal root was cancelled"])
      expect(yield* cancel("root.1.1")).toEqual(["its parent goal root.1 was cancelled"])
      expect(yield* cancel("root.2")).toEqual(["ended first"])
      expect(yield* cancel("other")).toEqual([])
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it("event version 3 is read as written: version 4 only adds optional fields", () => {
    const submitted = { _tag: "GoalSubmitted", goalId: "g", seq: 0, iteration: 0, at: 1, goal: "x", options: {}, tools: [], behaviour: 3 }
    expect(Event.decode(submitted, 3)).toEqual(Event.decode(submitted, 4))
    expect(Either.isRight(Event.decode(submitted, 3))).toBe(true)
  })
})

/**
 * The `delegate` tool in one process: a parent goal delegates sub-goals, with a model scripted per
 * goal (each goal's n-th answer depends only on how many results its prompt shows, so a resumed run
 * goes on with the same script), real built-in tools in a temp workspace, and a memory log.
 */
import { describe, expect, it } from "@effect/vitest"
import { Control, type Event, Goal, LanguageModel, Replay, Runner, State, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Cause, Context, Deferred, Effect, Either, Exit, Fiber, Layer, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Builtins, Delegate, Sandbox } from "../src/index.js"
import { makeDirs } from "./helpers.js"

const answer = (response: LanguageModel.Response): LanguageModel.Response => ({ ...response, usage: { inputTokens: 10, outputTokens: 5 } })
const call = (tool: string, input: unknown) => answer(LanguageModel.callTool(tool, input))
const done = (summary: string) => answer(LanguageModel.done(summary))

/** The first message of a request: the goal it is about. */
const goalOf = (request: LanguageModel.Request) => {
  const first = request.messages[0]
  return first?.role === "user" ? first.content : ""
}
const resultsIn = (request: LanguageModel.Request) => request.messages.filter((m) => m.role === "tool").length

/** A model that answers each goal (found by a marker in its text) from its own script, by how far it is. */
const treeModel = (scripts: Readonly<Record<string, ReadonlyArray<LanguageModel.Response>>>) =>
  LanguageModel.layerFunction((request) => {
    const goal = goalOf(request)
    const marker = Object.keys(scripts).find((key) => goal.includes(key))
    const steps = marker === undefined ? [] : scripts[marker] ?? []
    return steps[Math.min(resultsIn(request), steps.length - 1)] ?? done(`no script for ${goal}`)
  })

/** The world outside rx: each `note` call that ran, by call id. */
const ledger = () => {
  const lines: Array<string> = []
  const tool = Tool.make({
    name: "note",
    description: "Write a line in the ledger.",
    input: Schema.Struct({ line: Schema.String }),
    output: Schema.Struct({ noted: Schema.String }),
    idempotent: false,
    execute: ({ line }, { callId }) => Effect.sync(() => (lines.push(`${callId} ${line}`), { noted: line })),
    // A call that ran is in the ledger: its outcome is known after a crash.
    recover: ({ line }, { callId }) => Effect.sync(() => (lines.includes(`${callId} ${line}`) ? Option.some({ noted: line }) : Option.none()))
  })
  return { lines, tool }
}

/** A tool that never returns (to cancel or stop a goal during it), saying when it started. */
const blocking = (started: Deferred.Deferred<void>) =>
  Tool.make({
    name: "block",
    description: "Wait forever.",
    input: Schema.Struct({}),
    output: Schema.Struct({}),
    idempotent: false,
    execute: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
  })

/** Counts each run of a call, by call id: a non-idempotent call must never run twice. */
const counting = (runs: Map<string, number>) =>
  Layer.effect(
    ToolRegistry.ToolRegistry,
    Effect.map(ToolRegistry.ToolRegistry, (registry) => ({
      specs: registry.specs,
      prepare: (call: Tool.Call) =>
        Either.map(registry.prepare(call), (prepared) => ({
          ...prepared,
          run: Effect.zipRight(Effect.sync(() => runs.set(call.callId, (runs.get(call.callId) ?? 0) + 1)), prepared.run)
        }))
    }))
  )

/** A "process": the log (through `store`), the tools of `ws` with `extra`, the model, and `delegate`. */
const host = (
  store: StateStore.Service,
  ws: string,
  model: Layer.Layer<LanguageModel.LanguageModel>,
  extra: ReadonlyArray<Tool.Tool>,
  runs = new Map<string, number>(),
  config: Delegate.Config = {}
) => {
  const log = Layer.succeed(StateStore.StateStore, store)
  const base = counting(runs).pipe(
    Layer.provide(Builtins.layerWith({ workspace: ws, sandbox: "none", tools: ["read_file", "write_file", "shell"] }, extra))
  )
  const tools = Delegate.layer({ workspace: ws, ...config }).pipe(Layer.provide(Layer.mergeAll(base, log, model)))
  return Layer.mergeAll(tools, log, model)
}

/** A store over `inner` whose process dies before its append number `allowed + 1`, and all later ones. */
class Crash extends Error {}
const crashing = (inner: StateStore.Service, allowed: number, submitted: Map<string, number>, count = { appended: 0 }) => {
  let appended = 0
  return StateStore.StateStore.of({
    ...inner,
    append: (goalId, expectedSeq, events, state) =>
      Effect.suspend(() => {
        if (appended >= allowed) return Effect.die(new Crash("killed"))
        return Effect.tap(inner.append(goalId, expectedSeq, events, state), () =>
          Effect.sync(() => {
            appended++
            count.appended++
            if (events[0]?._tag === "GoalSubmitted") submitted.set(goalId, (submitted.get(goalId) ?? 0) + 1)
          }))
      })
  })
}

const eventsOf = (goalId: string) => Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))

/** The parent's script: two sub-goals, one noting in the ledger, one writing a file, then done. */
const twoChildren = {
  "[P]": [
    call("delegate", { goal: "[A] note a line", tools: ["note"] }),
    call("delegate", { goal: "[B] write b.txt", tools: ["write_file"] }),
    done("both sub-goals done")
  ],
  "[A]": [call("note", { line: "from A" }), done("noted")],
  "[B]": [call("write_file", { path: "b.txt", content: "b\n" }), done("wrote b.txt")]
}

const outputOf = (events: ReadonlyArray<Event.Event>, callId: string) =>
  events.find((e): e is Event.Of<"ToolSucceeded"> => e._tag === "ToolSucceeded" && e.callId === callId)?.output

describe("delegate", () => {
  it.live("a parent delegates two sub-goals: linked both ways, each run once, tokens counted up the tree; every log replays", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const notes = ledger()
      const store = yield* StateStore.makeMemory
      const layer = host(store, dirs.ws, treeModel(twoChildren), [notes.tool])
      const result = yield* Runner.run({ goal: "[P] delegate two tasks", goalId: "p", options: { settings: { workspace: dirs.ws } } }).pipe(Effect.provide(layer))
      expect(result).toMatchObject({ status: "terminated", reason: "done", detail: "both sub-goals done" })
      const parent = yield* eventsOf("p").pipe(Effect.provideService(StateStore.StateStore, store))
      expect(outputOf(parent, "p:1")).toEqual({ child: "p.1", reason: "done", summary: "noted", iterations: 2, tokens: 30 })
      expect(outputOf(parent, "p:2")).toEqual({ child: "p.2", reason: "done", summary: "wrote b.txt", iterations: 2, tokens: 30 })
      // The parent's budget counts its own answers (3 x 15) and its sub-goals' (2 x 30).
      expect(result.state.usage).toEqual({ inputTokens: 70, outputTokens: 35 })
      for (const [id, callId] of [["p.1", "p:1"], ["p.2", "p:2"]] as const) {
        const child = yield* eventsOf(id).pipe(Effect.provideService(StateStore.StateStore, store))
        expect(child[0]).toMatchObject({ _tag: "GoalSubmitted", parent: { goalId: "p", callId, depth: 1 } })
        expect(child.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
        expect((yield* Replay.verify(child)).reason).toBe("done")
      }
      // The sub-goals get only the tools they were given, in the parent's workspace.
      const a = yield* eventsOf("p.1").pipe(Effect.provideService(StateStore.StateStore, store))
      expect(a[0]?._tag === "GoalSubmitted" && a[0].tools.map((t) => t.name)).toEqual(["note"])
      expect(a[0]?._tag === "GoalSubmitted" && a[0].options.settings).toEqual({ workspace: dirs.ws, tools: ["note"] })
      expect(notes.lines).toEqual(["p.1:1 from A"])
      expect(fs.readFileSync(path.join(dirs.ws, "b.txt"), "utf8")).toBe("b\n")
      expect((yield* store.goals({ parent: "p" })).map((g) => g.goalId).sort()).toEqual(["p.1", "p.2"])
      expect((yield* store.goal("p.1")).pipe(Option.map((g) => g.parent))).toEqual(Option.some("p"))
      // Replaying the parent makes no live call: the model and tools are the recorded ones.
      expect((yield* Replay.verify(parent)).reason).toBe("done")
    }))

  it.live("drive: a goal recorded with delegate offered runs its sub-goals with the tools given; one recorded without it is never offered delegate", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const notes = ledger()
      const store = yield* StateStore.makeMemory
      const base = yield* Effect.map(Layer.build(Builtins.layerWith({ workspace: dirs.ws, sandbox: "none", tools: ["write_file"] }, [notes.tool])), (built) =>
        Context.get(built, ToolRegistry.ToolRegistry))
      const services = Layer.merge(Layer.succeed(StateStore.StateStore, store), treeModel(twoChildren))
      const drive = (goalId: string, registry: ToolRegistry.Service) =>
        Effect.gen(function*() {
          yield* Runner.submit({ goal: "[P] delegate two tasks", goalId, options: { settings: { workspace: dirs.ws } } }).pipe(
            Effect.provideService(ToolRegistry.ToolRegistry, registry)
          )
          return yield* Delegate.drive(yield* Goal.restore(goalId), base, { workspace: dirs.ws })
        }).pipe(Effect.provide(services))
      // Recorded with delegate's spec (`offer`): the drive extends the tools and the sub-goals run.
      const offered = yield* drive("p", Delegate.offer(base))
      expect(offered).toMatchObject({ status: "terminated", reason: "done", detail: "both sub-goals done" })
      expect(notes.lines).toEqual(["p.1:1 from A"])
      expect(fs.readFileSync(path.join(dirs.ws, "b.txt"), "utf8")).toBe("b\n")
      // Recorded without it: the same script's delegate calls are rejected, and no sub-goal is made.
      const plain = yield* drive("q", base)
      const events = yield* store.load("q")
      expect(events.some((e) => e._tag === "ActionRejected" && e.reason.includes("delegate"))).toBe(true)
      expect(yield* store.goals({ parent: "q" })).toEqual([])
      expect(plain.status).toBe("terminated")
    }).pipe(Effect.scoped))

  it.live("a crash just before each commit of the tree (the work before it done, its record not), then a resume: every log folds to the uncut run's State; no sub-goal submitted, no side effect run, twice", () =>
    Effect.gen(function*() {
      const tree = ["p", "p.1", "p.2"]
      const run = (store: StateStore.Service, ws: string, notes: ReturnType<typeof ledger>, runs: Map<string, number>, resume: boolean) =>
        (resume ? Runner.resume("p") : Runner.run({ goal: "[P] delegate two tasks", goalId: "p", options: { settings: { workspace: ws } } })).pipe(
          Effect.provide(host(store, ws, treeModel(twoChildren), [notes.tool], runs))
        )
      const statesOf = (store: StateStore.Service) =>
        Effect.forEach(tree, (id) => Effect.map(store.load(id), (events) => State.fromEvents(id, events)))

      // The uncut run, and how many commits the whole tree makes. Each run starts with the workspace as it was.
      const dirs = makeDirs()
      const fresh = () => fs.rmSync(path.join(dirs.ws, "b.txt"), { force: true })
      const uncutStore = yield* StateStore.makeMemory
      const commits = { appended: 0 }
      yield* run(crashing(uncutStore, Number.MAX_SAFE_INTEGER, new Map(), commits), dirs.ws, ledger(), new Map(), false)
      const uncut = yield* statesOf(uncutStore)
      expect(commits.appended).toBeGreaterThan(10)

      let cut = 0
      for (let allowed = 0; ; allowed++) {
        fresh()
        const inner = yield* StateStore.makeMemory
        const notes = ledger()
        const runs = new Map<string, number>()
        const submitted = new Map<string, number>()
        const first = yield* Effect.exit(run(crashing(inner, allowed, submitted), dirs.ws, notes, runs, false))
        if (Exit.isSuccess(first)) break
        expect(Cause.dieOption(first.cause).pipe(Option.map((d) => d instanceof Crash))).toEqual(Option.some(true))
        cut++
        // The next process resumes the parent (or runs it anew, if it was never recorded).
        const recorded = Option.isSome(yield* inner.goal("p"))
        yield* run(crashing(inner, Number.MAX_SAFE_INTEGER, submitted), dirs.ws, notes, runs, recorded)
        const states = yield* statesOf(inner)
        for (const [i, id] of tree.entries()) {
          expect(states[i], `cut after ${allowed} appends: goal ${id}`).toEqual(uncut[i])
          expect(submitted.get(id), `cut after ${allowed} appends: ${id} submitted`).toBe(1)
          expect((yield* Replay.verify(yield* inner.load(id))).reason).toBe("done")
        }
        expect(notes.lines, `cut after ${allowed} appends`).toEqual(["p.1:1 from A"])
        // No call of a non-idempotent tool ran twice (delegate, idempotent, runs again to find its sub-goal).
        for (const [callId, n] of runs) if (!callId.startsWith("p:")) expect(n, `cut after ${allowed} appends: ${callId}`).toBe(1)
        expect(fs.readFileSync(path.join(dirs.ws, "b.txt"), "utf8")).toBe("b\n")
      }
      // Every commit of the tree was a crash point.
      expect(cut).toBe(commits.appended)
    }), 600_000)

  it.live("a sub-goal waiting for approval suspends the parent, which says which sub-goal; approving it and resuming the parent finishes both", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const notes = ledger()
      const store = yield* StateStore.makeMemory
      const layer = () => host(store, dirs.ws, treeModel(twoChildren), [notes.tool])
      const first = yield* Runner.run({ goal: "[P] delegate two tasks", goalId: "p", options: { approval: { note: "ask" } } }).pipe(Effect.provide(layer()))
      expect(first).toMatchObject({ status: "suspended", reason: "awaiting_approval" })
      expect(first.state.suspended).toMatchObject({ child: "p.1" })
      expect(first.detail).toContain("sub-goal p.1 waits")
      expect((yield* store.goal("p")).pipe(Option.map((g) => g.suspended?.child))).toEqual(Option.some("p.1"))
      expect((yield* store.goal("p.1")).pipe(Option.map((g) => g.approval?.tool))).toEqual(Option.some("note"))
      expect(notes.lines).toEqual([])
      // Resuming the parent without a decision waits again and records nothing more.
      const before = (yield* store.load("p")).length
      const again = yield* Runner.resume("p").pipe(Effect.provide(layer()))
      expect(again.status).toBe("suspended")
      expect((yield* store.load("p")).length).toBe(before)
      yield* Control.approve("p.1", "alice").pipe(Effect.provideService(StateStore.StateStore, store))
      const end = yield* Runner.resume("p").pipe(Effect.provide(layer()))
      expect(end).toMatchObject({ status: "terminated", reason: "done" })
      expect(notes.lines).toEqual(["p.1:1 from A"])
      for (const id of ["p", "p.1", "p.2"]) expect((yield* Replay.verify(yield* store.load(id))).reason).toBe("done")
      // The parent's call was recorded once, after the sub-goal ended.
      expect((yield* store.load("p")).filter((e) => e._tag === "ToolSucceeded" && e.callId === "p:1")).toHaveLength(1)
    }))

  it.live("cancelling the parent while a sub-goal of a sub-goal runs ends all three cancelled, each recorded", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const started = yield* Deferred.make<void>()
      const store = yield* StateStore.makeMemory
      const scripts = {
        "[P]": [call("delegate", { goal: "[A] delegate further" }), done("never")],
        "[A]": [call("delegate", { goal: "[C] block" }), done("never")],
        "[C]": [call("block", {}), done("never")]
      }
      const layer = host(store, dirs.ws, treeModel(scripts), [blocking(started)])
      const fiber = yield* Effect.fork(Runner.run({ goal: "[P] go", goalId: "p" }).pipe(Effect.provide(layer)))
      yield* Deferred.await(started)
      expect(yield* Control.cancel("p", "stop").pipe(Effect.provideService(StateStore.StateStore, store))).toBe("requested")
      const result = yield* Fiber.join(fiber)
      expect(result).toMatchObject({ status: "terminated", reason: "cancelled" })
      for (const id of ["p", "p.1", "p.1.1"]) {
        const events = yield* store.load(id)
        expect(events.at(-1), id).toMatchObject({ _tag: "Terminated", reason: "cancelled" })
        expect((yield* Replay.verify(events)).reason).toBe("cancelled")
      }
      expect((yield* store.load("p.1.1")).find((e) => e._tag === "CancelRequested")).toMatchObject({ reason: "its parent goal p.1 was cancelled" })
      // The parent's call records how its sub-goal ended.
      expect(outputOf(yield* store.load("p"), "p:1")).toMatchObject({ child: "p.1", reason: "cancelled" })
    }))

  it.live("cancelling a parent that waits on its sub-goal cancels the sub-goal at once; resuming the parent records both ends", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const notes = ledger()
      const store = yield* StateStore.makeMemory
      const layer = () => host(store, dirs.ws, treeModel(twoChildren), [notes.tool])
      yield* Runner.run({ goal: "[P] delegate two tasks", goalId: "p", options: { approval: { note: "ask" } } }).pipe(Effect.provide(layer()))
      yield* Control.cancel("p").pipe(Effect.provideService(StateStore.StateStore, store))
      expect((yield* store.load("p.1")).at(-1)).toMatchObject({ _tag: "CancelRequested", reason: "its parent goal p was cancelled" })
      const end = yield* Runner.resume("p").pipe(Effect.provide(layer()))
      expect(end).toMatchObject({ status: "terminated", reason: "cancelled" })
      expect((yield* store.load("p.1")).at(-1)).toMatchObject({ _tag: "Terminated", reason: "cancelled" })
      expect(notes.lines).toEqual([])
      expect(Option.isNone(yield* store.goal("p.2"))).toBe(true)
      for (const id of ["p", "p.1"]) expect((yield* Replay.verify(yield* store.load(id))).reason).toBe("cancelled")
    }))

  it.live("a shutdown while a sub-goal runs leaves the parent's call started; the resume goes on with the same sub-goal", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const started = yield* Deferred.make<void>()
      const store = yield* StateStore.makeMemory
      const scripts = { "[P]": [call("delegate", { goal: "[C] block" }), done("back")], "[C]": [call("block", {}), done("unblocked")] }
      const fiber = yield* Effect.fork(Runner.run({ goal: "[P] go", goalId: "p" }).pipe(Effect.provide(host(store, dirs.ws, treeModel(scripts), [blocking(started)]))))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      const parent = yield* store.load("p")
      expect(parent.slice(-2).map((e) => e._tag)).toEqual(["ToolStarted", "Suspended"])
      expect((yield* store.load("p.1")).at(-1)).toMatchObject({ _tag: "Suspended", reason: "shutdown" })
      const end = yield* Runner.resume("p").pipe(Effect.provide(host(store, dirs.ws, treeModel(scripts), [blocking(yield* Deferred.make<void>())])))
      expect(end).toMatchObject({ status: "terminated", reason: "done", detail: "back" })
      expect(outputOf(yield* store.load("p"), "p:1")).toMatchObject({ child: "p.1", reason: "done", summary: "unblocked" })
      expect(Option.isNone(yield* store.goal("p.2"))).toBe(true)
      for (const id of ["p", "p.1"]) expect((yield* Replay.verify(yield* store.load(id))).reason).toBe("done")
    }))

  it.live("limits hold across the tree: depth, sub-goals per goal, the token budget; each refusal and end is recorded with its limit", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const notes = ledger()
      const failureOf = (events: ReadonlyArray<Event.Event>, callId: string) =>
        events.find((e): e is Event.Of<"ToolFailed"> => e._tag === "ToolFailed" && e.callId === callId)?.error

      // Depth: a sub-goal at the tree's depth limit may not delegate.
      const depthStore = yield* StateStore.makeMemory
      const deep = { "[P]": [call("delegate", { goal: "[A] go deeper" }), done("p")], "[A]": [call("delegate", { goal: "[C] too deep" }), done("a")] }
      yield* Runner.run({ goal: "[P] deep", goalId: "p", options: { maxDepth: 1 } }).pipe(Effect.provide(host(depthStore, dirs.ws, treeModel(deep), [notes.tool])))
      expect(failureOf(yield* depthStore.load("p.1"), "p.1:1")).toMatchObject({
        kind: "recoverable",
        message: expect.stringContaining("may be at most 1 deep (maxDepth 1)")
      })
      expect(Option.isNone(yield* depthStore.goal("p.1.1"))).toBe(true)

      // Sub-goals per goal.
      const countStore = yield* StateStore.makeMemory
      yield* Runner.run({ goal: "[P] two", goalId: "p", options: { maxChildren: 1 } }).pipe(Effect.provide(host(countStore, dirs.ws, treeModel(twoChildren), [notes.tool])))
      expect(failureOf(yield* countStore.load("p"), "p:2")).toMatchObject({ message: expect.stringContaining("its limit (maxChildren 1)") })
      expect(Option.isNone(yield* countStore.goal("p.2"))).toBe(true)

      // The token budget: the sub-goal gets what is left (45 of 60), ends at it, and the parent, counting its tokens, ends too.
      const budgetStore = yield* StateStore.makeMemory
      const spend = { "[P]": [call("delegate", { goal: "[A] spend" }), done("p")], "[A]": [call("note", { line: "x" }), call("note", { line: "y" }), call("note", { line: "z" }), done("a")] }
      const result = yield* Runner.run({ goal: "[P] budget", goalId: "p", options: { maxTotalTokens: 60 } }).pipe(
        Effect.provide(host(budgetStore, dirs.ws, treeModel(spend), [notes.tool]))
      )
      const child = yield* budgetStore.load("p.1")
      expect(child[0]).toMatchObject({ options: { maxTotalTokens: 45 } })
      expect(child.at(-1)).toMatchObject({ _tag: "Terminated", reason: "token_budget", detail: "the run used 45 tokens (limit 45)" })
      expect(outputOf(yield* budgetStore.load("p"), "p:1")).toMatchObject({ reason: "token_budget", tokens: 45 })
      expect(result).toMatchObject({ status: "terminated", reason: "token_budget", detail: "the run used 60 tokens (limit 60)" })
      for (const id of ["p", "p.1"]) expect((yield* Replay.verify(yield* budgetStore.load(id))).reason).toBe("token_budget")

      // No budget left for a second sub-goal of the same answer.
      const leftStore = yield* StateStore.makeMemory
      const both = {
        "[P]": [answer({ ...LanguageModel.text(""), finishReason: "tool_calls", toolCalls: [
          { id: "c0", name: "delegate", arguments: JSON.stringify({ goal: "[A] spend" }) },
          { id: "c1", name: "delegate", arguments: JSON.stringify({ goal: "[B] more" }) }
        ] }), done("p")],
        "[A]": spend["[A]"],
        "[B]": [done("b")]
      }
      yield* Runner.run({ goal: "[P] both", goalId: "p", options: { maxTotalTokens: 60 } }).pipe(Effect.provide(host(leftStore, dirs.ws, treeModel(both), [notes.tool])))
      expect(failureOf(yield* leftStore.load("p"), "p:1:1")).toMatchObject({ message: expect.stringContaining("none are left for a sub-goal") })
    }))

  it.live("a sub-goal in a folder of the workspace acts there only; a folder outside, or a tool not made for the folder, is refused", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      fs.mkdirSync(path.join(dirs.ws, "sub"))
      const store = yield* StateStore.makeMemory
      const workspaceTools = (workspace: string) =>
        Effect.map(Layer.build(Builtins.layer({ workspace, sandbox: "none", tools: ["write_file"] })), (context) => Context.get(context, ToolRegistry.ToolRegistry)).pipe(
          Effect.mapError((error) => error.message)
        )
      const scripts = {
        "[P]": [
          call("delegate", { goal: "[A] write", folder: "sub", tools: ["write_file"] }),
          call("delegate", { goal: "[B] escape", folder: "../outside" }),
          call("delegate", { goal: "[C] note there", folder: "sub", tools: ["write_file", "note"] }),
          done("p")
        ],
        "[A]": [call("write_file", { path: "x.txt", content: "x\n" }), done("a")]
      }
      const notes = ledger()
      yield* Runner.run({ goal: "[P] folders", goalId: "p", options: { settings: { workspace: dirs.ws } } }).pipe(
        Effect.provide(host(store, dirs.ws, treeModel(scripts), [notes.tool], new Map(), { workspaceTools }))
      )
      expect(fs.readFileSync(path.join(dirs.ws, "sub", "x.txt"), "utf8")).toBe("x\n")
      expect(fs.existsSync(path.join(dirs.ws, "x.txt"))).toBe(false)
      expect((yield* store.load("p.1"))[0]).toMatchObject({ options: { settings: { workspace: path.join(dirs.ws, "sub") } } })
      const parent = yield* store.load("p")
      expect(parent.find((e) => e._tag === "ToolFailed" && e.callId === "p:2")).toMatchObject({ error: { message: expect.stringContaining("must be a relative path inside your workspace") } })
      // The caller's own tool (as an MCP server's would be) is not made for the folder: refused, nothing submitted.
      expect(parent.find((e) => e._tag === "ToolFailed" && e.callId === "p:3")).toMatchObject({
        error: { message: expect.stringContaining("note cannot be confined to the folder sub (a sub-goal there has the tools made for that folder: write_file)") }
      })
      expect(yield* store.goals({ parent: "p" })).toHaveLength(1)
    }))

  it.live("a folder that is, lies inside or holds a protected or hidden path is refused, however it is spelled; nothing is written there", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const git = path.join(dirs.ws, ".git")
      fs.mkdirSync(path.join(git, "hooks"), { recursive: true })
      fs.writeFileSync(path.join(git, "config"), "[core]\n")
      fs.mkdirSync(path.join(dirs.ws, "sub"))
      fs.mkdirSync(path.join(dirs.ws, "state"))
      fs.mkdirSync(path.join(dirs.ws, "docs", "keep"), { recursive: true })
      fs.symlinkSync(".git", path.join(dirs.ws, "link"))
      fs.symlinkSync(".git/hooks", path.join(dirs.ws, "hooklink"))
      const before = fs.readFileSync(path.join(git, "config"), "utf8")
      const store = yield* StateStore.makeMemory
      const built: Array<string> = []
      const workspaceTools = (workspace: string, protection: Sandbox.Entries) =>
        Effect.map(
          Layer.build(Builtins.layer({ workspace, sandbox: "none", tools: ["write_file"], ...protection })),
          (context) => (built.push(workspace), Context.get(context, ToolRegistry.ToolRegistry))
        ).pipe(Effect.mapError((error) => error.message))
      const spellings = [".git", ".git/hooks", "./.git", "sub/../.git", "link", "hooklink", "state", "docs"]
      const scripts = {
        "[P]": [...spellings.map((folder) => call("delegate", { goal: `[A] write in ${folder}`, folder, tools: ["write_file"] })), done("p")],
        "[A]": [call("write_file", { path: "pre-commit", content: "touch /tmp/pwned\n" }), done("a")]
      }
      const protection = { protectedPaths: [".git", "docs/keep"], hiddenPaths: [path.join(dirs.ws, "state", "rx.db")] }
      yield* Runner.run({ goal: "[P] folders", goalId: "p", options: { maxConsecutiveFailures: 20, settings: { workspace: dirs.ws } } }).pipe(
        Effect.provide(host(store, dirs.ws, treeModel(scripts), [], new Map(), { workspaceTools, protection }))
      )
      const parent = yield* store.load("p")
      const failures = spellings.map((_, i) => parent.find((e) => e._tag === "ToolFailed" && e.callId === `p:${i + 1}`))
      expect(failures.map((f) => f?._tag === "ToolFailed" ? f.error.message : "ran")).toEqual([
        expect.stringContaining(`folder ".git": it is inside ".git"`),
        expect.stringContaining(`folder ".git/hooks": it is inside ".git"`),
        expect.stringContaining(`folder "./.git": it is inside ".git"`),
        expect.stringContaining(`folder "sub/../.git": it is inside ".git"`),
        expect.stringContaining(`folder "link": it is inside ".git"`),
        expect.stringContaining(`folder "hooklink": it is inside ".git"`),
        expect.stringContaining(`folder "state": it holds "state/rx.db", which is hidden from the agent`),
        expect.stringContaining(`folder "docs": it holds "docs/keep", which the agent may not change`)
      ])
      expect(yield* store.goals({ parent: "p" })).toHaveLength(0)
      expect(built).toEqual([])
      expect(fs.readdirSync(path.join(git, "hooks"))).toEqual([])
      expect(fs.readFileSync(path.join(git, "config"), "utf8")).toBe(before)
    }))

  it.live("a sub-goal's tools hold its ancestors' guards as absolute paths, never resolved again in its folder", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      fs.mkdirSync(path.join(dirs.ws, "sub", "conf"), { recursive: true })
      fs.mkdirSync(path.join(dirs.ws, "conf"), { recursive: true })
      const store = yield* StateStore.makeMemory
      const workspaceTools = (workspace: string, protection: Sandbox.Entries) =>
        Effect.map(
          Layer.build(Builtins.layer({ workspace, sandbox: "none", tools: ["write_file"], ...protection })),
          (context) => Context.get(context, ToolRegistry.ToolRegistry)
        ).pipe(Effect.mapError((error) => error.message))
      // The root protects "sub/conf/rules" (a path, not a name): resolved in "sub" it would name sub/sub/conf/rules.
      const protection = { protectedPaths: [".git", "sub/conf/rules"], hiddenPaths: [] }
      const scripts = {
        "[P]": [call("delegate", { goal: "[A] write", folder: "sub/conf", tools: ["write_file"] }), call("delegate", { goal: "[B] write", folder: "sub", tools: ["write_file"] }), done("p")],
        "[A]": [call("write_file", { path: "x.txt", content: "x\n" }), done("a")],
        "[B]": [call("write_file", { path: "conf/rules", content: "pwned\n" }), call("write_file", { path: "sub/conf/rules", content: "fine\n" }), done("b")]
      }
      yield* Runner.run({ goal: "[P] guards", goalId: "p", options: { settings: { workspace: dirs.ws } } }).pipe(
        Effect.provide(host(store, dirs.ws, treeModel(scripts), [], new Map(), { workspaceTools, protection }))
      )
      const parent = yield* store.load("p")
      expect(parent.find((e) => e._tag === "ToolFailed" && e.callId === "p:1")).toMatchObject({ error: { message: expect.stringContaining(`it holds "sub/conf/rules"`) } })
      // "sub" holds the guard too: refused; its guard checked directly below.
      expect(parent.find((e) => e._tag === "ToolFailed" && e.callId === "p:2")).toMatchObject({ error: { message: expect.stringContaining(`it holds "sub/conf/rules"`) } })
      const held = Sandbox.inherited(dirs.ws, protection)
      expect(held.protectedPaths).toEqual(expect.arrayContaining([".git", "sub/conf/rules", path.join(dirs.ws, ".git"), path.join(dirs.ws, "sub", "conf", "rules")]))
      // The tools of "sub" made with what it inherits refuse the guard by its absolute path.
      const refused = yield* Effect.scoped(Effect.flatMap(workspaceTools(path.join(dirs.ws, "sub"), held), (registry) =>
        ToolRegistry.invoke(registry, { callId: "t:1", tool: "write_file", input: { path: "conf/rules", content: "pwned\n" } })))
      expect(refused).toMatchObject({ _tag: "Failure", error: { message: expect.stringContaining("may read but not change") } })
      expect(fs.existsSync(path.join(dirs.ws, "sub", "conf", "rules"))).toBe(false)
      // Tools rooted inside an inherited guard (a folder swapped for a link into .git after the check) refuse to start.
      fs.mkdirSync(path.join(dirs.ws, ".git", "hooks"), { recursive: true })
      const inside = yield* Effect.scoped(Effect.either(workspaceTools(path.join(dirs.ws, ".git", "hooks"), Sandbox.inherited(dirs.ws, protection))))
      expect(inside).toMatchObject({ _tag: "Left", left: expect.stringContaining(`lies inside ${path.join(dirs.ws, ".git")}`) })
    }))

  it.live("a tree is bounded as a whole: past its goals or its iterations a delegate call is refused, saying which limit and how to raise it", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const failures = (events: ReadonlyArray<Event.Event>) =>
        events.filter((e): e is Event.Of<"ToolFailed"> => e._tag === "ToolFailed").map((e) => e.error.message)
      // Every goal delegates at each step, forever.
      const forever = { "[X]": [call("delegate", { goal: "[X] again" })] }

      // Goals: the tree holds at most 5, however deep it may grow.
      const goalsStore = yield* StateStore.makeMemory
      yield* Runner.run({ goal: "[X] grow", goalId: "p", options: { maxDepth: 100, maxChildren: 100, maxIterations: 3, maxTreeGoals: 5 } }).pipe(
        Effect.provide(host(goalsStore, dirs.ws, treeModel(forever), []))
      )
      const all = yield* goalsStore.goals()
      expect(all).toHaveLength(5)
      expect(all.every((g) => g.status === "terminated")).toBe(true)
      const refused = (yield* Effect.forEach(all, (g) => goalsStore.load(g.goalId))).flatMap(failures)
      expect(refused.length).toBeGreaterThan(0)
      expect(refused.every((m) => m.includes("holds 5 goals, its limit (maxTreeGoals 5; rx run --max-tree-goals N raises it for a new goal)"))).toBe(true)
      // The limit is recorded with every sub-goal, as the parent's other limits are.
      expect((yield* goalsStore.load("p.1"))[0]).toMatchObject({ options: { maxTreeGoals: 5 } })

      // Iterations: each sub-goal gets at most what the tree has left, and none starts past it.
      const iterationsStore = yield* StateStore.makeMemory
      yield* Runner.run({ goal: "[X] grow", goalId: "p", options: { maxDepth: 100, maxIterations: 10, maxTreeIterations: 4 } }).pipe(
        Effect.provide(host(iterationsStore, dirs.ws, treeModel(forever), []))
      )
      expect((yield* iterationsStore.load("p.1"))[0]).toMatchObject({ options: { maxIterations: 3 } })
      expect((yield* iterationsStore.load("p.1.1"))[0]).toMatchObject({ options: { maxIterations: 2 } })
      expect((yield* iterationsStore.load("p.1.1.1"))[0]).toMatchObject({ options: { maxIterations: 1 } })
      expect(failures(yield* iterationsStore.load("p.1.1.1"))).toEqual([
        expect.stringContaining("the goals of the tree of goal p have taken 4 iterations, its limit (maxTreeIterations 4; rx run --max-tree-iterations N raises it for a new goal)")
      ])
      expect(yield* iterationsStore.goals()).toHaveLength(4)
      for (const g of yield* iterationsStore.goals()) expect((yield* Replay.verify(yield* iterationsStore.load(g.goalId))).reason).toBeDefined()
    }))

  it.live("a goal waiting on a sub-goal that waits on its own names only the sub-goal it waits on, not every level below", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const notes = ledger()
      const store = yield* StateStore.makeMemory
      const scripts = {
        "[P]": [call("delegate", { goal: "[A] go deeper" }), done("p")],
        "[A]": [call("delegate", { goal: "[B] go deeper" }), done("a")],
        "[B]": [call("note", { line: "x" }), done("b")]
      }
      const result = yield* Runner.run({ goal: "[P] wait", goalId: "p", options: { approval: { note: "ask" } } }).pipe(
        Effect.provide(host(store, dirs.ws, treeModel(scripts), [notes.tool]))
      )
      expect(result).toMatchObject({ status: "suspended", reason: "awaiting_approval", detail: "sub-goal p.1 waits on its sub-goal p.1.1 (awaiting approval)" })
      expect((yield* store.load("p.1")).at(-1)).toMatchObject({ _tag: "Suspended", detail: expect.stringMatching(/^sub-goal p\.1\.1 waits: /), child: "p.1.1" })
    }))

  it.live("a shutdown while sub-goals of sub-goals run releases every lease before the log closes, and records each one's Suspended(shutdown)", () =>
    Effect.gen(function*() {
      const dirs = makeDirs()
      const started = yield* Deferred.make<void>()
      const inner = yield* StateStore.makeMemory
      const order: Array<string> = []
      let open = false
      const store = StateStore.StateStore.of({
        ...inner,
        lease: (goalId) =>
          // Letting go takes a moment, as a write to a database does.
          Effect.zipRight(inner.lease(goalId), Effect.addFinalizer(() => Effect.zipRight(Effect.sleep("20 millis"), Effect.sync(() => order.push(open ? `released ${goalId}` : `released ${goalId} after the log closed`)))))
      })
      // The log, opened and closed around the run as a transport's Layer is.
      const log = Layer.scoped(StateStore.StateStore, Effect.acquireRelease(Effect.sync(() => ((open = true), store)), () => Effect.sync(() => ((open = false), order.push("closed")))))
      const scripts = {
        "[P]": [call("delegate", { goal: "[A] go deeper" }), done("p")],
        "[A]": [call("delegate", { goal: "[B] go deeper" }), done("a")],
        "[B]": [call("delegate", { goal: "[C] block" }), done("b")],
        "[C]": [call("block", {}), done("c")]
      }
      const model = treeModel(scripts)
      const base = Builtins.layerWith({ workspace: dirs.ws, sandbox: "none", tools: ["read_file"] }, [blocking(started)])
      const tools = Delegate.layer({ workspace: dirs.ws }).pipe(Layer.provide(Layer.merge(base, model)))
      const fiber = yield* Effect.fork(
        Runner.run({ goal: "[P] go", goalId: "p", options: { maxDepth: 3 } }).pipe(Effect.provide(Layer.merge(tools, model)), Effect.provide(log))
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      expect(order.at(-1)).toBe("closed")
      expect(order.filter((line) => line.startsWith("released")).sort()).toEqual(["released p", "released p.1", "released p.1.1", "released p.1.1.1"])
      for (const id of ["p", "p.1", "p.1.1", "p.1.1.1"]) expect((yield* inner.load(id)).at(-1), id).toMatchObject({ _tag: "Suspended", reason: "shutdown" })
    }))
})

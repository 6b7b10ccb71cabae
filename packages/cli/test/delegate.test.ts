/**
 * Sub-goals at the command line, with real `rx` processes and a model server on 127.0.0.1 that
 * answers each goal from its own script (by a marker in the goal, and how many results its prompt
 * shows, so a resumed goal goes on with the same script): `rx run --tools ...,delegate`, SIGKILL at
 * every commit of the tree, cancel, approval, limits, replay.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Event, Replay, State } from "@rx/kernel"
import { Effect, Either } from "effect"
import { existsSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { jsonLines, rx, sandbox, start, until } from "./helpers.js"
import { call, done, logOf, treeModel } from "./tree.js"

const tools = ["--tools", "read_file,write_file,shell,delegate", "--sandbox", "none"]
const at = (box: { readonly db: string; readonly workspace: string }, baseUrl: string) =>
  ["--db", box.db, "--workspace", box.workspace, "--base-url", baseUrl, "--model", "fake"]


/** The root goal's id: the one with no parent. */
const rootOf = (logs: ReadonlyMap<string, ReadonlyArray<Event.Event>>) =>
  [...logs.values()].map((events) => events[0]).find((e) => e?._tag === "GoalSubmitted" && e.parent === undefined)?.goalId ?? ""

/**
 * A goal's State as compared across runs: each run's root id (derived from the clock) written
 * `ROOT`, a command's duration left out, and so the fingerprints (hashes of the results they
 * cover, which hold both).
 */
const comparable = (state: State.State, root: string) => {
  const { answered: _answered, recent: _recent, repeat, observed, ...rest } = state
  // A command's output says how long it ran: that differs from run to run.
  const text = JSON.stringify({ ...rest, repeat: repeat.count, observed: observed.count }).replaceAll(root, "ROOT").replace(/\\"duration_ms\\":\d+/g, "")
  return JSON.parse(text) as unknown
}

const twoChildren = {
  "[P]": [
    call("delegate", { goal: "[A] run the shell", tools: ["shell"] }),
    call("delegate", { goal: "[B] write b.txt", tools: ["write_file"] }),
    done("both sub-goals done")
  ],
  "[A]": [call("shell", { command: "echo A >> ledger.txt" }), done("the shell ran")],
  "[B]": [call("write_file", { path: "b.txt", content: "b\n" }), done("wrote b.txt")]
}

describe("rx run with delegate", () => {
  it.scopedLive("a parent delegates two sub-goals (shell, write_file): live output, list, inspect and replay show the tree", () =>
    Effect.gen(function*() {
      const model = yield* treeModel(twoChildren)
      const box = sandbox()
      const ran = yield* rx(["run", "[P] delegate two tasks", ...tools, ...at(box, model.baseUrl)])
      expect(ran.code, ran.stderr).toBe(0)
      const logs = yield* logOf(box.db)
      const root = rootOf(logs)
      expect([...logs.keys()].sort()).toEqual([root, `${root}.1`, `${root}.2`].sort())
      expect(ran.stdout).toContain(`${root}.1 sub-goal of ${root} (call ${root}:1): [A] run the shell`)
      expect(ran.stdout).toContain(`${root}.2 ended done: wrote b.txt`)
      expect(readFileSync(join(box.workspace, "ledger.txt"), "utf8")).toBe("A\n")
      expect(readFileSync(join(box.workspace, "b.txt"), "utf8")).toBe("b\n")
      // The call's output names the sub-goal and how it ended; the sub-goal names its parent and call.
      expect(logs.get(root)?.find((e) => e._tag === "ToolSucceeded")).toMatchObject({ output: { child: `${root}.1`, reason: "done", summary: "the shell ran" } })
      expect(logs.get(`${root}.2`)?.[0]).toMatchObject({ parent: { goalId: root, callId: `${root}:2`, depth: 1 }, tools: [{ name: "write_file" }] })
      // The parent counts its sub-goals' tokens: 3 answers of its own, 2 of each sub-goal, 10 tokens each.
      const parent = State.fromEvents(root, logs.get(root) ?? [])
      expect(parent.usage.inputTokens + parent.usage.outputTokens).toBe(70)
      // rx list shows each sub-goal under the goal that delegated it, marked; --json names its parent.
      const listed = yield* rx(["list", "--db", box.db])
      const lines = listed.stdout.split("\n")
      const row = lines.findIndex((line) => line.startsWith(`${root} `))
      expect(lines[row + 1]).toMatch(new RegExp(`^└ ${root}\\.1 +terminated\\(done\\) .*\\[A\\] run the shell$`))
      expect(lines[row + 2]).toMatch(new RegExp(`^└ ${root}\\.2 +terminated\\(done\\) .*\\[B\\] write b\\.txt$`))
      expect(jsonLines((yield* rx(["list", "--json", "--db", box.db])).stdout).map((g) => [g["goalId"], g["parent"]]).sort()).toEqual(
        [[root, null], [`${root}.1`, root], [`${root}.2`, root]].sort()
      )
      // rx inspect places each goal in its tree.
      const inspected = (yield* rx(["inspect", root, "--db", box.db])).stdout
      expect(inspected).toMatch(new RegExp(`\\nsub-goals ${root}\\.1 +terminated\\(done\\) +\\[A\\] run the shell\\n {10}${root}\\.2 +terminated\\(done\\) +\\[B\\] write b\\.txt\\n`))
      expect((yield* rx(["inspect", `${root}.2`, "--db", box.db])).stdout).toContain(`\nparent    ${root} (its call ${root}:2, depth 1): rx inspect ${root}\n`)
      const json = JSON.parse((yield* rx(["inspect", root, "--json", "--db", box.db])).stdout) as Record<string, unknown>
      expect(json["children"]).toMatchObject([{ goalId: `${root}.1`, status: "terminated", reason: "done" }, { goalId: `${root}.2` }])
      expect(JSON.parse((yield* rx(["inspect", `${root}.1`, "--json", "--db", box.db])).stdout)).toMatchObject({ parent: { goalId: root, callId: `${root}:1`, depth: 1 } })
      // Replay of every log of the tree verifies, with no live call.
      const requests = model.stats.requests
      for (const id of [root, `${root}.1`, `${root}.2`]) {
        const replayed = yield* rx(["replay", id, "--db", box.db])
        expect(replayed.code, replayed.stdout).toBe(0)
        expect(replayed.stdout).toContain("identical")
      }
      expect(model.stats.requests).toBe(requests)
      expect(model.stats.invalid).toEqual([])
    }))

  it.scopedLive("SIGKILL at every commit of the tree, then rx resume of the parent: the logs fold to the uncut run's States; no sub-goal submitted, no side effect run, twice", () =>
    Effect.gen(function*() {
      const model = yield* treeModel(twoChildren)
      // One workspace (emptied before each run, so every State records the same path), a new log each time.
      const box = sandbox()
      const fresh = () => {
        for (const file of ["ledger.txt", "b.txt"]) rmSync(join(box.workspace, file), { force: true })
        return join(box.root, `rx-${Math.random().toString(36).slice(2)}.db`)
      }
      const run = (db: string, env: Record<string, string> = {}) =>
        start(["run", "[P] delegate two tasks", ...tools, ...at({ db, workspace: box.workspace }, model.baseUrl)], env).done
      const uncutDb = fresh()
      expect((yield* Effect.promise(() => run(uncutDb))).code).toBe(0)
      const uncut = yield* logOf(uncutDb)
      const uncutRoot = rootOf(uncut)
      const statesOf = (logs: ReadonlyMap<string, ReadonlyArray<Event.Event>>, root: string) =>
        new Map([...logs].map(([id, events]) => [id.replace(root, "ROOT"), State.fromEvents(id, events)] as const))
      const expected = statesOf(uncut, uncutRoot)

      let kills = 0
      const windows = new Set<string>()
      for (let commit = 1; ; commit++) {
        const db = fresh()
        const ran = yield* Effect.promise(() => run(db, { RX_CRASH_AFTER_COMMITS: String(commit) }))
        if (ran.signal !== "SIGKILL") {
          // Past the tree's last commit: the run ended by itself.
          expect(ran.code, ran.stderr).toBe(0)
          break
        }
        kills++
        const killed = yield* logOf(db)
        // Where the kill landed, for the windows that matter to sub-goals.
        const top = killed.get(rootOf(killed))?.at(-1)
        const pendingChild = top?._tag === "ToolStarted" && top.tool === "delegate" ? killed.get(`${rootOf(killed)}.${top.callId.split(":").at(-1)}`) : undefined
        if (top?._tag === "ToolStarted" && pendingChild === undefined) windows.add("the parent's call started, its sub-goal not yet submitted")
        if (pendingChild?.at(-1)?._tag === "Terminated") windows.add("the sub-goal ended, the parent's call not yet recorded")
        if ([...killed.values()].some((events) => events[0]?._tag === "GoalSubmitted" && events[0].parent !== undefined && events.at(-1)?._tag === "ToolStarted")) {
          windows.add("during a call of a sub-goal")
        }
        if (killed.size > 0) {
          const resumed = yield* rx(["resume", rootOf(killed), "--db", db, "--base-url", model.baseUrl, "--model", "fake"])
          expect(resumed.code, `killed after commit ${commit}: ${resumed.stdout}${resumed.stderr}`).toBe(0)
          // A sub-goal's call cut by the kill: the resumed run's line for it shows its recorded input.
          for (const events of killed.values()) {
            const cut = events.at(-1)
            if (events[0]?._tag !== "GoalSubmitted" || events[0].parent === undefined || cut?._tag !== "ToolStarted") continue
            const line = resumed.stdout.split("\n").find((l) => l.startsWith(`  ${cut.goalId} `) && l.includes(` ${cut.tool} `))
            expect(line, `killed after commit ${commit}: ${resumed.stdout}`).toContain(JSON.stringify(cut.input).slice(0, 30))
          }
        } else {
          // Killed before anything was recorded (the first commit is the goal's): nothing to resume.
          expect(commit).toBe(1)
          continue
        }
        const logs = yield* logOf(db)
        const root = rootOf(logs)
        const states = statesOf(logs, root)
        // The same goals: no sub-goal made twice, none missing.
        expect([...states.keys()].sort(), `killed after commit ${commit}`).toEqual([...expected.keys()].sort())
        for (const [id, events] of logs) {
          expect(events.filter((e) => e._tag === "GoalSubmitted"), `${id}`).toHaveLength(1)
          expect(events.filter((e) => e._tag === "Terminated"), `${id}`).toHaveLength(1)
          expect(Either.isRight(yield* Effect.either(Replay.verify(events))), `killed after commit ${commit}: replay of ${id}`).toBe(true)
        }
        // The shell ran at most once (never again after a kill), and so did each call.
        const ledger = existsSync(join(box.workspace, "ledger.txt")) ? readFileSync(join(box.workspace, "ledger.txt"), "utf8") : ""
        expect(["", "A\n"], `killed after commit ${commit}: the ledger`).toContain(ledger)
        for (const [key, state] of states) {
          const before = expected.get(key)
          if (before === undefined) continue
          const events = logs.get(key.replace("ROOT", root)) ?? []
          const cut = events.filter((e): e is Event.Of<"ToolFailed"> => e._tag === "ToolFailed" && e.error.kind === "unknown")
          if (cut.length === 0) {
            expect(comparable(state, root), `killed after commit ${commit}: ${key}`).toEqual(comparable(before, uncutRoot))
            continue
          }
          // Killed between a call's ToolStarted and its outcome: a call that is not idempotent, and
          // whose effect its tool cannot check, is recorded as unknown and never run again; the
          // goal goes on to the same end.
          expect(cut, `killed after commit ${commit}: ${key}`).toHaveLength(1)
          expect(state.terminated).toEqual(before.terminated)
          expect(state.turns.map((t) => t.calls.map((c) => [c.tool, c.input]))).toEqual(before.turns.map((t) => t.calls.map((c) => [c.tool, c.input])))
        }
        // The tree's end, as the parent records it, is the uncut run's whatever was cut.
        expect(comparable(states.get("ROOT") ?? State.empty(""), root)).toEqual(comparable(expected.get("ROOT") ?? State.empty(""), uncutRoot))
      }
      // Every commit of the tree was a kill point (14: 6 of the parent, 4 of each sub-goal), these among them.
      expect(kills).toBe(14)
      expect([...windows].sort()).toEqual([
        "during a call of a sub-goal",
        "the parent's call started, its sub-goal not yet submitted",
        "the sub-goal ended, the parent's call not yet recorded"
      ])
    }), 900_000)

  it.scopedLive("cancelling the parent ends its sub-goal and the sub-goal's own sub-goal cancelled, each recorded", () =>
    Effect.gen(function*() {
      const model = yield* treeModel({
        "[P]": [call("delegate", { goal: "[A] delegate further" }), done("never")],
        "[A]": [call("delegate", { goal: "[C] wait" }), done("never")],
        "[C]": [call("shell", { command: "sleep 30" }), done("never")]
      })
      const box = sandbox()
      const running = start(["run", "[P] a tree", "--json", ...tools, ...at(box, model.baseUrl)])
      yield* until(() => jsonLines(running.output().stdout).some((e) => e["_tag"] === "ToolStarted" && e["tool"] === "shell"), "the sub-sub-goal's shell call to start")
      const root = String(jsonLines(running.output().stdout)[0]?.["goalId"])
      const cancelled = yield* rx(["cancel", root, "--db", box.db])
      expect(cancelled.code, cancelled.stderr).toBe(0)
      const ran = yield* Effect.promise(() => running.done)
      expect(ran.code, ran.stderr).toBe(7)
      const logs = yield* logOf(box.db)
      expect([...logs.keys()].sort()).toEqual([root, `${root}.1`, `${root}.1.1`].sort())
      for (const [id, events] of logs) {
        expect(events.at(-1), id).toMatchObject({ _tag: "Terminated", reason: "cancelled" })
        expect((yield* rx(["replay", id, "--db", box.db])).code, id).toBe(0)
      }
      expect(logs.get(`${root}.1.1`)?.find((e) => e._tag === "CancelRequested")).toMatchObject({ reason: `its parent goal ${root}.1 was cancelled` })
      // The parent's call records how its sub-goal ended.
      expect(logs.get(root)?.find((e) => e._tag === "ToolSucceeded")).toMatchObject({ output: { child: `${root}.1`, reason: "cancelled" } })
    }))

  /** A parent whose first sub-goal's shell call waits for approval: the run suspends (exit 11). */
  const askingTree = Effect.gen(function*() {
    const model = yield* treeModel(twoChildren)
    const box = sandbox()
    const ran = yield* rx(["run", "[P] delegate two tasks", "--ask", "shell", ...tools, ...at(box, model.baseUrl)])
    expect(ran.code, ran.stderr).toBe(11)
    const root = rootOf(yield* logOf(box.db))
    return { model, box, ran, root, child: `${root}.1` }
  })

  it.scopedLive("a sub-goal asking for approval suspends the parent; rx approve of the sub-goal, then rx resume of the parent, finishes both", () =>
    Effect.gen(function*() {
      const { model, box, ran, root, child } = yield* askingTree
      expect(ran.stdout).toContain(`goal ${root} waits on its sub-goal ${child} (awaiting_approval)`)
      expect(ran.stdout).toContain(`approve: rx approve ${child}`)
      expect(existsSync(join(box.workspace, "ledger.txt"))).toBe(false)
      const listed = jsonLines((yield* rx(["list", "--json", "--db", box.db])).stdout)
      expect(listed.find((g) => g["goalId"] === root)).toMatchObject({ status: "open", suspended: { reason: "awaiting_approval", child } })
      expect(listed.find((g) => g["goalId"] === child)).toMatchObject({ parent: root, approval: { tool: "shell" } })
      // The parent has no call of its own to decide: rx approve says which goal does.
      const wrong = yield* rx(["approve", root, "--db", box.db])
      expect(wrong.code).toBe(1)
      expect(wrong.stderr).toContain(`rx approve ${child} decides it`)
      const approved = yield* rx(["approve", child, "--by", "ann", "--db", box.db])
      expect(approved.code).toBe(0)
      // The next step is the one the suspension gave: the parent's resume goes on with both.
      expect(ran.stdout).toContain(`then:    rx resume ${root} --db ${box.db} goes on with both`)
      expect(approved.stdout.trimEnd().split("\n").at(-1)).toBe(
        `recorded, nothing run yet: rx resume ${root} --db ${box.db} goes on with both (sub-goal ${child} runs the call exactly as requested)`
      )
      const resumed = yield* rx(["resume", root, "--db", box.db, "--base-url", model.baseUrl, "--model", "fake"])
      expect(resumed.code, resumed.stderr).toBe(0)
      expect(readFileSync(join(box.workspace, "ledger.txt"), "utf8")).toBe("A\n")
      const logs = yield* logOf(box.db)
      for (const [id, events] of logs) {
        expect(events.at(-1), id).toMatchObject({ _tag: "Terminated", reason: "done" })
        expect(Either.isRight(yield* Effect.either(Replay.verify(events))), id).toBe(true)
      }
      // The parent's call was recorded once, after its sub-goal ended.
      expect(logs.get(root)?.filter((e) => e._tag === "ToolSucceeded" && e.callId === `${root}:1`)).toHaveLength(1)
    }))

  it.scopedLive("rx approve of a sub-goal cancelled with its parent says the goal was cancelled and runs nothing; the resume ends both cancelled", () =>
    Effect.gen(function*() {
      const { model, box, root, child } = yield* askingTree
      expect((yield* rx(["cancel", root, "--db", box.db])).code).toBe(0)
      const approved = yield* rx(["approve", child, "--by", "ann", "--db", box.db])
      expect(approved.code, approved.stderr).toBe(0)
      expect(approved.stdout).toContain(`recorded, but goal ${child} was cancelled (its parent goal ${root} was cancelled): it runs nothing more`)
      expect(approved.stdout).not.toContain("runs it exactly as requested")
      const resumed = yield* rx(["resume", root, "--db", box.db, "--base-url", model.baseUrl, "--model", "fake"])
      expect(resumed.code, resumed.stderr).toBe(7)
      expect(existsSync(join(box.workspace, "ledger.txt"))).toBe(false)
      for (const [id, events] of yield* logOf(box.db)) expect(events.at(-1), id).toMatchObject({ _tag: "Terminated", reason: "cancelled" })
    }))

  it.scopedLive("rx deny of a sub-goal's call gives the next step its suspension gave: rx resume of the parent", () =>
    Effect.gen(function*() {
      const { box, ran, root, child } = yield* askingTree
      expect(ran.stdout).toContain(`then:    rx resume ${root} --db ${box.db} goes on with both`)
      const denied = yield* rx(["deny", child, "--reason", "not now", "--by", "ann", "--db", box.db])
      expect(denied.code, denied.stderr).toBe(0)
      expect(denied.stdout.trimEnd().split("\n").at(-1)).toBe(
        `recorded, nothing run yet: rx resume ${root} --db ${box.db} goes on with both (sub-goal ${child} tells its model)`
      )
    }))

  it.scopedLive("limits hold across the tree with recorded reasons: --max-depth, and --max-total-tokens counting the sub-goals' tokens", () =>
    Effect.gen(function*() {
      const model = yield* treeModel({
        "[P]": [call("delegate", { goal: "[A] go deeper" }), done("p")],
        "[A]": [call("delegate", { goal: "[C] too deep" }), call("shell", { command: "true" }), call("shell", { command: "true" }), done("a")]
      })
      const deep = sandbox()
      const ran = yield* rx(["run", "[P] deep", "--max-depth", "1", ...tools, ...at(deep, model.baseUrl)])
      expect(ran.code, ran.stderr).toBe(0)
      const logs = yield* logOf(deep.db)
      const root = rootOf(logs)
      expect(logs.has(`${root}.1.1`)).toBe(false)
      expect(logs.get(`${root}.1`)?.find((e) => e._tag === "ToolFailed")).toMatchObject({
        tool: "delegate",
        error: { kind: "recoverable", message: expect.stringContaining("its sub-goals may be at most 1 deep (maxDepth 1)") }
      })
      expect(logs.get(root)?.[0]).toMatchObject({ options: { maxDepth: 1 } })

      // 10 tokens an answer: the parent's first leaves 30 of 40 for its sub-goal, which ends at them; the parent, counting them, ends too.
      const budget = sandbox()
      const spent = yield* rx(["run", "[P] budget", "--max-total-tokens", "40", ...tools, ...at(budget, model.baseUrl)])
      expect(spent.code, spent.stderr).toBe(9)
      const spentLogs = yield* logOf(budget.db)
      const top = rootOf(spentLogs)
      expect(spentLogs.get(`${top}.1`)?.[0]).toMatchObject({ options: { maxTotalTokens: 30 } })
      expect(spentLogs.get(`${top}.1`)?.at(-1)).toMatchObject({ _tag: "Terminated", reason: "token_budget", detail: "the run used 30 tokens (limit 30)" })
      expect(spentLogs.get(top)?.at(-1)).toMatchObject({ _tag: "Terminated", reason: "token_budget", detail: "the run used 40 tokens (limit 40)" })
      for (const events of spentLogs.values()) expect(Either.isRight(yield* Effect.either(Replay.verify(events)))).toBe(true)
    }))

  it.scopedLive("delegate is offered only when --tools names it, and recorded so a resume offers it again", () =>
    Effect.gen(function*() {
      const model = yield* treeModel({ "[P]": [call("delegate", { goal: "[A] x" }), done("p")], "[A]": [done("a")] })
      const box = sandbox()
      const ran = yield* rx(["run", "[P] without", "--sandbox", "none", ...at(box, model.baseUrl)])
      expect(ran.code, ran.stderr).toBe(0)
      const logs = yield* logOf(box.db)
      expect(logs.size).toBe(1)
      const [events] = [...logs.values()]
      expect(events?.[0]?._tag === "GoalSubmitted" && events[0].tools.map((t) => t.name)).not.toContain("delegate")
      expect(events?.find((e) => e._tag === "ActionRejected")).toMatchObject({ kind: "unknown_tool" })
      const other = sandbox()
      yield* rx(["run", "[P] with", ...tools, ...at(other, model.baseUrl)])
      const withIt = [...(yield* logOf(other.db)).values()].map((log) => log[0]).find((e) => e?._tag === "GoalSubmitted" && e.parent === undefined)
      expect(withIt).toMatchObject({ options: { settings: { tools: ["read_file", "write_file", "shell", "delegate"] } } })
    }))
})

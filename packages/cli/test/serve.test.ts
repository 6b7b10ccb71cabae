/**
 * `rx serve`, the real binary: goals submitted over HTTP with the token it wrote, their events
 * followed to the end, and SIGTERM draining the server with a goal left open and recorded, which
 * the next start resumes and finishes; 50 goals at once kept to `--concurrency`; and a SIGKILL
 * during a shell call, after which the next start finishes the goal without running the call again.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { busyModel, jsonLines, processesWith, rx, sandbox, start, until } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** The JSON body of a scripted answer. */
const bodyOf = (reply: FakeServer.Reply): unknown => (reply.kind === "json" ? reply.body : null)

/** Whether a model request already carries a tool result (the goal's second request). */
const hasToolResult = (body: unknown): boolean =>
  typeof body === "object" && body !== null && "messages" in body && Array.isArray(body.messages) &&
  body.messages.some((m: unknown) => typeof m === "object" && m !== null && "role" in m && m.role === "tool")

/** Poll `check` every 250 ms until it yields a value, or die after `timeoutMs`. */
const poll = <A>(what: string, check: Effect.Effect<A | undefined>, timeoutMs = 120_000) =>
  Effect.gen(function*() {
    const began = Date.now()
    while (true) {
      const found = yield* check
      if (found !== undefined) return found
      if (Date.now() - began > timeoutMs) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("250 millis")
    }
  })

/** Start `rx serve` on a free port; resolves with its URL and token once it listens. Killed with the scope if still running. */
const serve = (box: ReturnType<typeof sandbox>, baseUrl: string, extra: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => start(["serve", "--port", "0", "--db", box.db, "--workspace", box.workspace, "--base-url", baseUrl, "--model", "fake", "--sandbox", "none", ...extra])),
      (child) => Effect.promise(() => (child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"), child.done))
    )
    yield* until(() => /listening on (http:\/\/\S+)/.test(child.output().stdout) || child.exitCode !== null, "rx serve to listen")
    const url = /listening on (http:\/\/\S+)/.exec(child.output().stdout)?.[1] ?? ""
    expect(url, child.output().stderr).not.toBe("")
    const tokenFile = join(box.root, "rx-server.token")
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600)
    const token = readFileSync(tokenFile, "utf8").trim()
    const request = (path: string, init: RequestInit = {}) =>
      Effect.promise(() => fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...init.headers } }))
    /** A goal's events as JSON lines, followed until it terminates. */
    const follow = (goalId: string) =>
      Effect.flatMap(request(`/v1/goals/${goalId}/events`), (response) => Effect.promise(() => response.text())).pipe(Effect.map(jsonLines))
    /** GET a JSON body. */
    const getJson = (path: string) => Effect.flatMap(request(path), (response) => Effect.promise((): Promise<unknown> => response.json()))
    return { child, url, request, follow, getJson }
  })

describe("rx serve", () => {
  it.scopedLive("runs a goal submitted over HTTP; its events stream to Terminated; SIGTERM stops the server", () =>
    Effect.gen(function*() {
      const model = yield* FakeServer.make([call("write_file", { path: "out.txt", content: "from the server" }), done("written")])
      const box = sandbox()
      const { child, follow, request, url } = yield* serve(box, model.baseUrl)
      expect((yield* Effect.promise(() => fetch(`${url}/v1/goals`))).status).toBe(401)
      const submitted = yield* request("/v1/goals", { method: "POST", body: JSON.stringify({ goal: "write out.txt" }) })
      expect(submitted.status).toBe(202)
      const { goalId } = (yield* Effect.promise(() => submitted.json())) as { goalId: string }
      const events = yield* follow(goalId)
      expect(events.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(readFileSync(join(box.workspace, "out.txt"), "utf8")).toBe("from the server")
      child.kill("SIGTERM")
      const ended = yield* Effect.promise(() => child.done)
      expect(ended.code, ended.stderr).toBe(0)
      // The same log, read by the CLI.
      expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)
    }))

  it.scopedLive("SIGTERM during a model call leaves the goal open (Suspended(shutdown)); the next start resumes and finishes it", () =>
    Effect.gen(function*() {
      const model = yield* FakeServer.make([{ kind: "stall" }, done("after the restart")])
      const box = sandbox()
      const first = yield* serve(box, model.baseUrl)
      const submitted = yield* first.request("/v1/goals", { method: "POST", body: JSON.stringify({ goal: "wait" }) })
      const { goalId } = (yield* Effect.promise(() => submitted.json())) as { goalId: string }
      yield* model.waitFor(1)
      first.child.kill("SIGTERM")
      const stopped = yield* Effect.promise(() => first.child.done)
      expect(stopped.code, stopped.stderr).toBe(0)
      const open = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout)
      expect(open.at(-1)).toMatchObject({ _tag: "Suspended", reason: "shutdown" })
      const second = yield* serve(box, model.baseUrl)
      const events = yield* second.follow(goalId)
      expect(events.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done", detail: "after the restart" })
      second.child.kill("SIGTERM")
      expect((yield* Effect.promise(() => second.child.done)).code).toBe(0)
    }))

  it.scopedLive("50 goals at once with --concurrency 4: all 202, all terminated(done), never more than 4 running at once", () =>
    Effect.gen(function*() {
      // Each goal: read hello.txt, then done; every answer comes 200 ms late, so goals running together overlap.
      const model = yield* busyModel(200, (body) =>
        bodyOf(hasToolResult(body) ? done("read it") : call("read_file", { path: "hello.txt" })))
      const box = sandbox()
      const { child, getJson, request } = yield* serve(box, model.baseUrl, ["--concurrency", "4"])
      const submitted = yield* Effect.forEach(
        Array.from({ length: 50 }, (_, i) => i),
        (i) =>
          Effect.flatMap(
            request("/v1/goals", { method: "POST", body: JSON.stringify({ goal: `read hello.txt (${i})` }) }),
            (response) => Effect.map(Effect.promise(() => response.json() as Promise<{ goalId: string }>), (json) => ({ status: response.status, goalId: json.goalId }))
          ),
        { concurrency: "unbounded" }
      )
      expect(submitted.map((s) => s.status)).toEqual(Array(50).fill(202))
      const ids = new Set(submitted.map((s) => s.goalId))
      expect(ids.size).toBe(50)
      type Page = { readonly goals: ReadonlyArray<{ readonly goalId: string; readonly status: string; readonly reason: string | null; readonly iterations: number }> }
      const terminated = yield* poll("50 terminated goals", Effect.gen(function*() {
        const page = (yield* getJson("/v1/goals?status=terminated&limit=100")) as Page
        return page.goals.length === 50 ? page.goals : undefined
      }))
      expect(new Set(terminated.map((g) => g.goalId))).toEqual(ids)
      for (const goal of terminated) expect(goal).toMatchObject({ status: "terminated", reason: "done", iterations: 2 })
      // Two model requests per goal, every one valid, at most 4 at once, and goals really ran together.
      expect(model.stats.invalid).toEqual([])
      expect(model.stats.requests).toBe(100)
      expect(model.stats.maxInFlight).toBeLessThanOrEqual(4)
      expect(model.stats.maxInFlight).toBeGreaterThanOrEqual(2)
      // The same log, read by the CLI while the server runs.
      const listed = jsonLines((yield* rx(["list", "--json", "--db", box.db])).stdout)
      expect(listed).toHaveLength(50)
      expect(listed.filter((g) => g["status"] === "terminated" && g["reason"] === "done")).toHaveLength(50)
      child.kill("SIGTERM")
      const ended = yield* Effect.promise(() => child.done)
      expect(ended.code, ended.stderr).toBe(0)
    }), 180_000)

  it.scopedLive("kill -9 of the server during a shell call; a restart completes the goal with no duplicated side effect; rx replay verifies it", () =>
    Effect.gen(function*() {
      // A number sleep adds to its time: it marks the call's processes in /proc.
      const marker = `0.0${Math.floor(Math.random() * 1e9)}`
      const command = `echo x >> ledger.txt; sleep 60 ${marker}`
      const model = yield* FakeServer.make([call("shell", { command }), done("after the crash")])
      const box = sandbox()
      const ledger = join(box.workspace, "ledger.txt")
      // Whatever is left running if the resume does not end it is killed with the test.
      yield* Effect.addFinalizer(() => Effect.sync(() => processesWith(marker).forEach((pid) => process.kill(pid, "SIGKILL"))))
      const first = yield* serve(box, model.baseUrl)
      const submitted = yield* first.request("/v1/goals", {
        method: "POST",
        body: JSON.stringify({ goal: "append to the ledger", options: { approval: { shell: "auto" } } })
      })
      expect(submitted.status).toBe(202)
      const { goalId } = (yield* Effect.promise(() => submitted.json())) as { goalId: string }
      yield* until(() => existsSync(ledger) && readFileSync(ledger, "utf8") === "x\n", "the shell call to write the ledger", 60_000)
      first.child.kill("SIGKILL")
      const killed = yield* Effect.promise(() => first.child.done)
      expect(killed.signal).toBe("SIGKILL")
      // The call was recorded before it ran, and nothing after it: its outcome is not in the log.
      const crashed = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout)
      expect(crashed.at(-1)).toMatchObject({ _tag: "ToolStarted", tool: "shell", input: { command } })
      // The same database and workspace: the open goal resumes at start.
      const second = yield* serve(box, model.baseUrl)
      const events = yield* second.follow(goalId)
      expect(events.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done", detail: "after the crash" })
      expect(readFileSync(ledger, "utf8")).toBe("x\n")
      // What the killed server left running of the call (its timeout died with it) was ended by the resume.
      expect(processesWith(marker)).toEqual([])
      const started = events.filter((e) => e["_tag"] === "ToolStarted")
      expect(started).toHaveLength(1)
      const outcome = events.filter((e) => e["callId"] === started[0]?.["callId"] && e["_tag"] !== "ToolStarted")
      expect(outcome).toHaveLength(1)
      expect(outcome[0]).toMatchObject({ _tag: "ToolFailed", tool: "shell", error: { kind: "unknown" } })
      expect(JSON.stringify(outcome[0])).toContain("whether it took effect is unknown")
      // The model was told, on the only request after the crash.
      expect(model.received).toHaveLength(2)
      expect(JSON.stringify(model.received[1]?.body)).toContain("whether it took effect is unknown")
      expect(model.received.map((r) => r.invalid)).toEqual([undefined, undefined])
      expect(yield* second.getJson(`/v1/goals/${goalId}`)).toMatchObject({ status: "terminated", reason: "done" })
      second.child.kill("SIGTERM")
      const ended = yield* Effect.promise(() => second.child.done)
      expect(ended.code, ended.stderr).toBe(0)
      const inspected = yield* rx(["inspect", goalId, "--db", box.db])
      expect(inspected.code, inspected.stderr).toBe(0)
      expect(inspected.stdout).toContain("whether it took effect is unknown")
      const replayed = yield* rx(["replay", goalId, "--db", box.db])
      expect(replayed.code, replayed.stdout + replayed.stderr).toBe(0)
      expect(replayed.stdout).toContain(`replay of goal ${goalId}: identical, ${events.length} events, no live calls (done)`)
    }), 120_000)
})

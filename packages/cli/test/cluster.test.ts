/**
 * `rx worker` and `rx serve --cluster`, the real binary on a real Postgres: two workers and a server
 * that runs no goal; goals submitted over HTTP run on the workers in their own folders of the
 * shared workspace root, and the other commands read the Postgres log. The volume id is hidden
 * from the tools, and what a cluster needs is checked before anything starts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort } from "../../cluster/test/processes.js"
import * as FakeServer from "../../llm/test/FakeServer.js"
import * as Database from "../../store-pg/test/database.js"
import { busyModel, exec, jsonLines, rx, start, until } from "./helpers.js"

/** The JSON body of an answer calling `name`. */
const call = (name: string, args: unknown): unknown => {
  const reply = FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
  return reply.kind === "json" ? reply.body : null
}

/** The messages of a model request. */
const messagesOf = (body: unknown): ReadonlyArray<{ readonly role?: unknown; readonly content?: unknown }> =>
  typeof body === "object" && body !== null && "messages" in body && Array.isArray(body.messages) ? body.messages : []

/**
 * Each goal's text names the file to write ("write NAME"): the model writes it, then says done; a
 * goal "read the volume" asks for the root's `.rx-volume` instead.
 */
const answer = (body: unknown) => {
  const messages = messagesOf(body)
  if (messages.some((m) => m.role === "tool")) return call("done", { summary: "finished" })
  const goal = messages.map((m) => (typeof m.content === "string" ? m.content : "")).join("\n")
  if (goal.includes("read the volume")) return call("read_file", { path: ".rx-volume" })
  const name = /write (\S+\.txt)/.exec(goal)?.[1] ?? "none.txt"
  return call("write_file", { path: name, content: `written for ${name}` })
}

/** Start `rx args`, killed with the scope; resolves once its stdout matches `ready`. */
const started = (args: ReadonlyArray<string>, env: Record<string, string>, ready: RegExp) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => start(args, env)),
      (child) => Effect.promise(() => (child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"), child.done))
    )
    yield* until(() => ready.test(child.output().stdout) || child.exitCode !== null, `rx ${args[0]} to start`, 60_000)
    expect(child.exitCode, child.output().stderr).toBeNull()
    return child
  })

/**
 * `rx worker`s (two by default; `worker` starts one more) and an `rx serve --cluster` on the test's
 * database, with the model at `baseUrl`; `submit` records a goal in a new folder of the shared
 * root, `events` follows one to its end.
 */
const cluster = (baseUrl: string, workerCount = 2, workerFlags: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const { url } = yield* Database.TestDatabase
    const root = mkdtempSync(join(tmpdir(), "rx-cluster-"))
    const workspaces = join(root, "workspaces")
    mkdirSync(workspaces)
    const state = join(root, "state")
    const env = { XDG_STATE_HOME: state }
    const shared = ["--db", url, "--workspace", workspaces, "--sandbox", "none", "--failover", "5"]
    const worker = () =>
      Effect.flatMap(freePort, (port) =>
        started(["worker", ...shared, ...workerFlags, "--port", String(port), "--base-url", baseUrl, "--model", "fake"], env, /rx worker: on/))
    const workers = yield* Effect.forEach(Array.from({ length: workerCount }), worker)
    const server = yield* started(["serve", "--cluster", "--port", "0", ...shared], env, /listening on (http:\/\/\S+)/)
    const base = /listening on (http:\/\/\S+)/.exec(server.output().stdout)?.[1] ?? ""
    const token = readFileSync(join(state, "rx", "rx-server.token"), "utf8").trim()
    const request = (path: string, init: RequestInit = {}) =>
      Effect.promise(() => fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } }))
    const submit = (goal: string, workspace?: string) =>
      Effect.gen(function*() {
        if (workspace !== undefined) mkdirSync(join(workspaces, workspace))
        const response = yield* request("/v1/goals", { method: "POST", body: JSON.stringify({ goal, ...(workspace === undefined ? {} : { workspace }) }) })
        expect(response.status).toBe(202)
        return ((yield* Effect.promise(() => response.json())) as { goalId: string }).goalId
      })
    const events = (goalId: string) => Effect.map(Effect.flatMap(request(`/v1/goals/${goalId}/events`), (r) => Effect.promise(() => r.text())), jsonLines)
    return { url, env, workspaces, workers, worker, server, submit, events }
  })

describe("rx worker and rx serve --cluster", () => {
  it.scopedLive("goals submitted over HTTP run on the workers, each in its own folder; the CLI reads the Postgres log", () =>
    Effect.gen(function*() {
      const model = yield* busyModel(0, answer)
      const { env, events, server, submit, url, workspaces } = yield* cluster(model.baseUrl)
      expect(server.output().stdout).toContain("run by the cluster's workers")
      const names = Array.from({ length: 6 }, (_, i) => `p${i}`)
      const goalIds = yield* Effect.forEach(names, (name) => submit(`write ${name}.txt`, name))
      // Followed through the server to the end: the workers ran them.
      for (const goalId of goalIds) expect((yield* events(goalId)).at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      for (const name of names) {
        expect(readFileSync(join(workspaces, name, `${name}.txt`), "utf8")).toBe(`written for ${name}.txt`)
        // Never in another goal's folder.
        for (const other of names) if (other !== name) expect(existsSync(join(workspaces, other, `${name}.txt`))).toBe(false)
      }

      // The goal working at the root cannot read the volume id.
      const volume = readFileSync(join(workspaces, ".rx-volume"), "utf8").trim()
      const probedEvents = yield* events(yield* submit("read the volume"))
      expect(probedEvents.at(-1)).toMatchObject({ _tag: "Terminated" })
      expect(probedEvents.find((e) => e["_tag"] === "ToolFailed")).toMatchObject({ tool: "read_file", error: { details: { _tag: "@rx/tools/PathRefused" } } })
      // Recorded with the goal, never read by a tool.
      expect(JSON.stringify(probedEvents.slice(1))).not.toContain(volume)

      // The other commands read the same log.
      const listed = yield* rx(["list", "--db", url, "--json"], env)
      expect(listed.code, listed.stderr).toBe(0)
      expect(jsonLines(listed.stdout).filter((g) => g["status"] === "terminated")).toHaveLength(goalIds.length + 1)
      for (const goalId of goalIds) {
        const replayed = yield* rx(["replay", goalId, "--db", url], env)
        expect(replayed.code, replayed.stderr + replayed.stdout).toBe(0)
      }
      const inspected = yield* rx(["inspect", goalIds[0] ?? "", "--db", url], env)
      expect(inspected.stdout).toContain("write_file")
      // The password never shows.
      expect(inspected.stdout + inspected.stderr + server.output().stdout).not.toContain(":rx@")
    }).pipe(Effect.provide(Database.layer)), 180_000)

  it.scopedLive("rx run --cluster hands the goal to the workers and follows it as a local run prints it; rx resume --cluster of an ended goal says how it ended; rx run --cluster --continue goes on from it", () =>
    Effect.gen(function*() {
      const model = yield* busyModel(0, answer)
      // One worker: the goal can only run there.
      const { env, url, workspaces } = yield* cluster(model.baseUrl, 1)
      const folder = join(workspaces, "c1")
      mkdirSync(folder)
      const ran = yield* rx(["run", "write c1.txt", "--cluster", "--failover", "5", "--db", url, "--workspace", folder, "--sandbox", "none", "--json"], env)
      expect(ran.code, ran.stderr).toBe(0)
      const log = jsonLines(ran.stdout)
      expect(log[0]).toMatchObject({ _tag: "GoalSubmitted", options: { settings: { workspace: folder, volume: readFileSync(join(workspaces, ".rx-volume"), "utf8").trim() } } })
      expect(log.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      // The worker wrote it, with the worker's model: this command has none.
      expect(readFileSync(join(folder, "c1.txt"), "utf8")).toBe("written for c1.txt")
      expect(model.stats.requests).toBe(2)
      const goalId = String(log[0]?.["goalId"])
      const again = yield* rx(["resume", goalId, "--cluster", "--db", url], env)
      expect(again.code, again.stderr).toBe(0)
      expect(again.stdout).toContain("done after 2 iterations")
      expect(model.stats.requests).toBe(2)
      // Continued on the cluster: a new goal that names the ended one runs on the worker; the ended log stays as it was.
      const continued = yield* rx(["run", "--continue", goalId, "and now check it", "--cluster", "--failover", "5", "--db", url, "--workspace", folder, "--sandbox", "none", "--json"], env)
      expect(continued.code, continued.stderr).toBe(0)
      const next = jsonLines(continued.stdout)
      expect(next[0]).toMatchObject({ _tag: "GoalSubmitted", goal: "write c1.txt", continues: { goalId, reason: "done", text: "and now check it" } })
      expect(next.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(model.stats.requests).toBeGreaterThan(2)
      expect(jsonLines((yield* rx(["events", goalId, "--db", url], env)).stdout)).toEqual(log)
      // A folder on no volume, a SQLite log, a model setting: each one line, nothing recorded.
      const outside = yield* rx(["run", "write x.txt", "--cluster", "--db", url, "--workspace", mkdtempSync(join(tmpdir(), "rx-novolume-"))], env)
      expect(outside.code).toBe(1)
      expect(outside.stderr).toContain("is on no rx volume")
      const sqlite = yield* rx(["run", "write x.txt", "--cluster", "--db", join(mkdtempSync(join(tmpdir(), "rx-")), "rx.db"), "--workspace", folder], env)
      expect(sqlite.stderr).toContain("--cluster needs the cluster's Postgres log")
      const modelled = yield* rx(["run", "write x.txt", "--cluster", "--db", url, "--workspace", folder, "--model", "mine"], env)
      expect(modelled.stderr).toMatch(/^rx: --model does not apply with --cluster: the workers run goals with their own model/)
      const model2 = yield* rx(["resume", goalId, "--cluster", "--db", url, "--model", "other"], env)
      expect(model2.stderr).toMatch(/^rx: --model does not apply with --cluster/)
      const listed = yield* rx(["list", "--db", url, "--json"], env)
      expect(jsonLines(listed.stdout)).toHaveLength(2)
    }).pipe(Effect.provide(Database.layer)), 180_000)

  it.scopedLive("SIGTERM drains a worker: what it runs past the drain time is recorded and finished by the other", () =>
    Effect.gen(function*() {
      // Slow answers and long goals (a file per step, 6 steps: about 9 s, past the 2 s drain).
      const model = yield* busyModel(1_500, (body) => {
        const messages = messagesOf(body)
        const steps = messages.filter((m) => m.role === "tool").length
        if (steps >= 6) return call("done", { summary: "finished" })
        const name = /write (\S+)\.txt/.exec(messages.map((m) => (typeof m.content === "string" ? m.content : "")).join("\n"))?.[1] ?? "none"
        return call("write_file", { path: `${name}-${steps}.txt`, content: `step ${steps}` })
      })
      const { events, submit, url, workers, workspaces } = yield* cluster(model.baseUrl, 2, ["--drain", "2"])
      const names = Array.from({ length: 6 }, (_, i) => `q${i}`)
      const goalIds = yield* Effect.forEach(names, (name) => submit(`write ${name}.txt`, name))
      // Every goal has asked the model once: each is running somewhere. Then the worker holding the
      // most goals' leases is stopped (the shards, not the test, decide where each goal runs).
      yield* until(() => model.stats.requests >= names.length, "every goal to ask the model", 60_000)
      const holders = (yield* exec("psql", [url, "-Atc", "SELECT holder FROM rx_leases"])).stdout.split("\n")
      const held = (pid: number | undefined) => holders.filter((h) => h.startsWith(`pid ${pid} `)).length
      const stopped = [...workers].sort((a, b) => held(b.pid) - held(a.pid))[0]
      if (stopped === undefined) return
      expect(held(stopped.pid), holders.join("\n")).toBeGreaterThan(0)
      stopped.kill("SIGTERM")
      const exit = yield* Effect.promise(() => stopped.done)
      expect(exit.code, exit.stderr).toBe(0)
      let handedOver = 0
      for (const goalId of goalIds) {
        const log = yield* events(goalId)
        expect(log.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
        if (log.some((e) => e["_tag"] === "Suspended" && e["reason"] === "shutdown")) handedOver++
        // No call started twice.
        const started = log.filter((e) => e["_tag"] === "ToolStarted").map((e) => e["callId"])
        expect(new Set(started).size).toBe(started.length)
      }
      // The stopped worker had goals: each recorded its shutdown, and the other worker finished it.
      expect(handedOver).toBeGreaterThan(0)
      for (const name of names) expect(readFileSync(join(workspaces, name, `${name}-5.txt`), "utf8")).toBe("step 5")
    }).pipe(Effect.provide(Database.layer)), 180_000)

  it.scopedLive("a cluster's goal runs only on its volume: not by a plain rx serve, not by rx resume elsewhere; a worker started later runs it", () =>
    Effect.gen(function*() {
      const model = yield* busyModel(0, answer)
      // No worker yet: the goal is recorded, its Drive message waits in the cluster's storage.
      const { env, events, submit, url, worker, workspaces } = yield* cluster(model.baseUrl, 0)
      const goalId = yield* submit("write late.txt", "late")
      const summary = () => Effect.map(rx(["list", "--db", url, "--json"], env), (out) => jsonLines(out.stdout).find((g) => g["goalId"] === goalId))
      expect(yield* summary()).toMatchObject({ status: "open", nextSeq: 1 })

      // A plain server on the same log and root resumes open goals at start, but not this one.
      const plain = yield* started(
        ["serve", "--db", url, "--workspace", workspaces, "--sandbox", "none", "--port", "0", "--base-url", model.baseUrl, "--model", "fake"],
        { ...env, XDG_STATE_HOME: mkdtempSync(join(tmpdir(), "rx-state-")) },
        /listening on/
      )
      yield* until(() => plain.output().stderr.includes("is not run here"), "the plain server to pass the goal by")
      // rx resume in a same-named folder of another disk is refused before anything runs.
      const elsewhere = mkdtempSync(join(tmpdir(), "rx-elsewhere-"))
      mkdirSync(join(elsewhere, "late"))
      const resumed = yield* rx(["resume", goalId, "--db", url, "--workspace", join(elsewhere, "late"), "--base-url", model.baseUrl, "--model", "fake"], env)
      expect(resumed.code).toBe(1)
      expect(resumed.stderr).toContain("was submitted to a cluster")
      expect(model.stats.requests).toBe(0)
      expect(yield* summary()).toMatchObject({ status: "open", nextSeq: 1 })

      // A worker joins: the waiting Drive message reaches it, and the goal runs in its folder.
      yield* worker()
      expect((yield* events(goalId)).at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(readFileSync(join(workspaces, "late", "late.txt"), "utf8")).toBe("written for late.txt")
      expect(existsSync(join(elsewhere, "late", "late.txt"))).toBe(false)
    }).pipe(Effect.provide(Database.layer)), 180_000)

  it.effect("what a cluster needs is checked before anything starts", () =>
    Effect.gen(function*() {
      const sqlite = yield* rx(["worker", "--db", join(tmpdir(), "rx.db"), "--port", "7999", "--model", "m"])
      expect(sqlite.code).toBe(1)
      expect(sqlite.stderr).toContain("needs the Postgres log of the cluster")
      const url = "postgres://rx:secret@127.0.0.1:1/rx"
      const noPort = yield* rx(["worker", "--db", url, "--model", "m"])
      expect(noPort.stderr).toContain("--port")
      const remote = yield* rx(["worker", "--db", url, "--model", "m", "--port", "7999", "--host", "10.1.2.3"])
      expect(remote.stderr).toContain("--allow-remote")
      // A missing folder is said before the cluster's database is reached for its volume.
      const missing = yield* rx(["worker", "--db", url, "--model", "m", "--port", "7999", "--workspace", join(tmpdir(), "rx-no-such-folder")])
      expect(missing.code).toBe(1)
      expect(missing.stderr).toContain("rx-no-such-folder does not exist")
      const failover = yield* rx(["serve", "--db", url, "--model", "m", "--failover", "5"])
      expect(failover.stderr).toContain("--failover applies with --cluster")
      const unreachable = yield* rx(["list", "--db", url])
      expect(unreachable.code).toBe(1)
      expect(unreachable.stderr.trim().split("\n")).toHaveLength(1)
      expect(unreachable.stderr).not.toContain("secret")
    }), 60_000)
})

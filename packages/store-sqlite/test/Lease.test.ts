/**
 * Goal leases: one runner at a time per goal, across processes and hosts. In-process cases use
 * rows written directly to simulate other holders; the cross-process cases run the child runner
 * (`fixtures/runner-child.mjs`, on the built packages) and hold it inside a tool call.
 */
import { describe, expect, it } from "@effect/vitest"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Deferred, Effect, Exit, Layer, Option, Scope } from "effect"
import { spawn } from "node:child_process"
import * as os from "node:os"
import * as path from "node:path"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { Event, Replay, Runner, StateStore } from "@rx/kernel"
import { Migrations, SqliteStore } from "@rx/store-sqlite"
import { echoRun, endsOnce, submitted } from "./fixtures.js"
import { exec, layerWithClient, tempDb, tempDir } from "./helpers.js"

const child = fileURLToPath(new URL("./fixtures/runner-child.mjs", import.meta.url))

const lease = (goalId: string) => Effect.flatMap(StateStore.StateStore, (store) => store.lease(goalId))
const runner = (goalId: string) => Effect.flatMap(StateStore.StateStore, (store) => store.runner(goalId))
const leaseRows = (goalId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (client) =>
    client.unsafe<{ readonly host: string; readonly pid: number; readonly token: string; readonly heartbeat_at: number }>(
      "SELECT host, pid, token, heartbeat_at FROM leases WHERE goal_id = ?",
      [goalId]
    ))
const insertLease = (goalId: string, row: { readonly host: string; readonly pid: number; readonly heartbeatAt: number }) =>
  exec(
    `INSERT OR REPLACE INTO leases (goal_id, host, pid, token, acquired_at, heartbeat_at) VALUES ('${goalId}', '${row.host}', ${row.pid}, 'their-token', ${
      row.heartbeatAt - 60_000
    }, ${row.heartbeatAt})`
  )

/** A pid no process has: a child that has exited. */
const deadPid = Effect.async<number>((resume) => {
  const proc = spawn(process.execPath, ["-e", ""], { stdio: "ignore" })
  proc.on("exit", () => resume(Effect.succeed(proc.pid ?? 0)))
})

describe("leases", () => {
  it.scoped("a version-1 file (before leases) opens, is migrated and keeps its log; read-only reads it as is", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const first = Migrations.migrations["0001_create_log"]
      if (first === undefined) return expect.fail("no migration 0001")
      const event = submitted("old")
      yield* Effect.gen(function*() {
        yield* Migrator.make({})({ loader: Migrator.fromRecord({ "0001_create_log": first }), table: Migrations.table }).pipe(
          Effect.provideServiceEffect(SqlClient.SqlClient, SqliteClient.SqliteClient)
        )
        const client = yield* SqliteClient.SqliteClient
        // The payload as rx 0.1 wrote it: slim, the row's columns hold _tag, goal_id and seq.
        const { _tag: _t, goalId: _g, seq: _s, ...slim } = JSON.parse(Event.encodeJson(event)) as Record<string, unknown>
        yield* client.unsafe("INSERT INTO events (goal_id, seq, tag, version, payload) VALUES (?, 0, ?, ?, ?)", [
          "old",
          event._tag,
          Event.version,
          JSON.stringify(slim)
        ])
        expect(yield* client.unsafe("SELECT name FROM sqlite_master WHERE name = 'leases'")).toEqual([])
      }).pipe(Effect.provide(Layer.fresh(SqliteStore.layerClient({ filename }))))

      // Read-only: version 1 is read as is (leases are for runners only), and running is refused.
      yield* Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        expect((yield* store.load("old")).map((e) => e._tag)).toEqual(["GoalSubmitted"])
        const refused = yield* Effect.flip(Effect.scoped(store.lease("old")))
        expect(refused._tag).toBe("@rx/kernel/StoreError")
        expect(refused.message).toContain("is read-only")
        // No leases table yet: nobody runs it with leases.
        expect(yield* store.runner("old")).toEqual(Option.none())
      }).pipe(Effect.provide(Layer.fresh(SqliteStore.layer({ filename, readonly: true }))))

      yield* Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        expect((yield* store.load("old")).map((e) => e._tag)).toEqual(["GoalSubmitted"])
        expect(yield* exec(`SELECT max(migration_id) AS id FROM ${Migrations.table}`)).toEqual([{ id: Migrations.latest }])
        yield* Effect.scoped(Effect.zipRight(store.lease("old"), Effect.flatMap(leaseRows("old"), (rows) => Effect.sync(() => expect(rows).toHaveLength(1)))))
        expect(yield* leaseRows("old")).toEqual([])
      }).pipe(Effect.provide(Layer.fresh(layerWithClient({ filename }))))
    }))

  it.scoped("held in this process: a second lease names this process; released with the scope, also across stores", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const a = yield* Layer.build(layerWithClient({ filename }))
      const b = yield* Layer.build(SqliteStore.layer({ filename }))
      const scope = yield* Scope.make()
      yield* Scope.extend(lease("g"), scope).pipe(Effect.provide(a))
      const held = yield* Effect.flip(Effect.scoped(lease("g"))).pipe(Effect.provide(b))
      expect(held._tag).toBe("@rx/kernel/LeaseHeld")
      expect(held.message).toContain(`goal g is being run elsewhere (another runner in this process (pid ${process.pid} on host ${os.hostname()}), since`)
      yield* Effect.flatMap(StateStore.StateStore, (s) => s.append("g", 0, [submitted("g")])).pipe(Effect.provide(a))
      const busy = yield* Effect.flip(Runner.resume("g")).pipe(Effect.provide(echoRun(0)), Effect.provide(b))
      expect(busy._tag).toBe("@rx/kernel/GoalBusy")
      expect(busy.message).toContain("(another runner in this process (pid")
      yield* Scope.close(scope, Exit.void)
      expect(yield* leaseRows("g").pipe(Effect.provide(a))).toEqual([])
      yield* Effect.scoped(lease("g")).pipe(Effect.provide(b))
    }))

  it.scoped("a row left in this process by a lease whose release failed does not block", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      yield* Effect.gen(function*() {
        const scope = yield* Scope.make()
        yield* Scope.extend(lease("g"), scope)
        yield* exec("PRAGMA query_only = 1")
        // The release cannot write: logged, and the scope still closes cleanly.
        expect(yield* Scope.close(scope, Exit.void).pipe(Effect.exit)).toEqual(Exit.void)
        yield* exec("PRAGMA query_only = 0")
        expect((yield* leaseRows("g")).map((r) => r.pid)).toEqual([process.pid])
        yield* Effect.scoped(lease("g"))
        expect(yield* leaseRows("g")).toEqual([])
      }).pipe(Effect.provide(layerWithClient({ filename })))
    }))

  it.scoped("same host: a live process's row blocks, a dead process's row is taken over", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const dead = yield* deadPid
      yield* Effect.gen(function*() {
        yield* insertLease("live", { host: os.hostname(), pid: process.ppid, heartbeatAt: 0 })
        const held = yield* Effect.flip(Effect.scoped(lease("live")))
        expect(held.message).toContain(`(pid ${process.ppid} on host ${os.hostname()}, since 1969-12-31T23:59:00.000Z)`)
        yield* insertLease("dead", { host: os.hostname(), pid: dead, heartbeatAt: Date.now() })
        yield* Effect.scoped(Effect.zipRight(
          lease("dead"),
          Effect.flatMap(leaseRows("dead"), (rows) => Effect.sync(() => expect(rows.map((r) => r.pid)).toEqual([process.pid])))
        ))
      }).pipe(Effect.provide(layerWithClient({ filename })))
    }))

  it.scopedLive("another host: a fresh heartbeat blocks (and resume stops busy), a stale one is taken over", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      yield* Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        yield* store.append("g", 0, [submitted("g")])
        const now = Date.now()
        yield* insertLease("g", { host: "elsewhere", pid: process.pid, heartbeatAt: now - 2_000 })
        const busy = yield* Effect.flip(Runner.resume("g").pipe(Effect.provide(echoRun(1))))
        expect(busy._tag).toBe("@rx/kernel/GoalBusy")
        expect(busy.message).toBe(
          `goal g is being run elsewhere (pid ${process.pid} on host elsewhere, since ${new Date(now - 62_000).toISOString()}, last heartbeat ${
            new Date(now - 2_000).toISOString()
          }); this runner stopped`
        )
        expect(yield* store.load("g")).toHaveLength(1)
        yield* insertLease("g", { host: "elsewhere", pid: process.pid, heartbeatAt: now - 31_000 })
        const result = yield* Runner.resume("g").pipe(Effect.provide(echoRun(1)))
        expect(result.reason).toBe("done")
        expect(yield* leaseRows("g")).toEqual([])
      }).pipe(Effect.provide(layerWithClient({ filename })))
      // With a shorter timeout, a heartbeat of 2 s ago is already stale.
      yield* Effect.gen(function*() {
        yield* insertLease("h", { host: "elsewhere", pid: 1, heartbeatAt: Date.now() - 2_000 })
        yield* Effect.scoped(lease("h"))
      }).pipe(Effect.provide(layerWithClient({ filename, leaseHeartbeatMs: 500, leaseTimeoutMs: 1_500 })))
    }))

  it.scopedLive("the holder's heartbeat advances while held and stops once the lease is taken over", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      yield* Effect.gen(function*() {
        const scope = yield* Scope.make()
        yield* Scope.extend(lease("g"), scope)
        const [first] = yield* leaseRows("g")
        yield* Effect.sleep("200 millis")
        const [later] = yield* leaseRows("g")
        expect(later?.heartbeat_at ?? 0).toBeGreaterThan(first?.heartbeat_at ?? Infinity)
        // Another host took it over: our heartbeat no longer touches the row, our release keeps it.
        yield* exec("UPDATE leases SET host = 'elsewhere', token = 'theirs', heartbeat_at = 5 WHERE goal_id = 'g'")
        yield* Effect.sleep("150 millis")
        yield* Scope.close(scope, Exit.void)
        expect(yield* leaseRows("g")).toEqual([{ host: "elsewhere", pid: process.pid, token: "theirs", heartbeat_at: 5 }])
      }).pipe(Effect.provide(layerWithClient({ filename, leaseHeartbeatMs: 40, leaseTimeoutMs: 1_000 })))
    }))

  it.scopedLive("runner: a holder counts while its process lives and its heartbeat is fresh, on this host or another; also read-only", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const dead = yield* deadPid
      const now = Date.now()
      yield* Effect.gen(function*() {
        yield* insertLease("live", { host: os.hostname(), pid: process.ppid, heartbeatAt: now - 1_000 })
        // A live pid with no heartbeat for longer than the timeout: hung, or a new process took the pid.
        yield* insertLease("hung", { host: os.hostname(), pid: process.ppid, heartbeatAt: now - 31_000 })
        yield* insertLease("dead", { host: os.hostname(), pid: dead, heartbeatAt: now })
        yield* insertLease("far", { host: "elsewhere", pid: dead, heartbeatAt: now - 1_000 })
        yield* insertLease("far-stale", { host: "elsewhere", pid: process.ppid, heartbeatAt: now - 31_000 })
      }).pipe(Effect.provide(Layer.fresh(layerWithClient({ filename }))))
      const expected = {
        live: `pid ${process.ppid} on host ${os.hostname()}, since ${new Date(now - 61_000).toISOString()}`,
        hung: undefined,
        dead: undefined,
        far: `pid ${dead} on host elsewhere, since ${new Date(now - 61_000).toISOString()}, last heartbeat ${new Date(now - 1_000).toISOString()}`,
        "far-stale": undefined,
        never: undefined
      }
      for (const readonly of [false, true]) {
        const seen = yield* Effect.forEach(Object.keys(expected), (goalId) => Effect.map(runner(goalId), Option.getOrUndefined)).pipe(
          Effect.provide(Layer.fresh(SqliteStore.layer({ filename, readonly })))
        )
        expect(seen).toEqual(Object.values(expected))
      }
    }))

  it.effect("the lease settings are checked: the timeout must exceed the heartbeat", () =>
    Effect.gen(function*() {
      const bad = yield* Effect.flip(Layer.build(SqliteStore.layer({ filename: "unused.db", leaseHeartbeatMs: 30_000 })).pipe(Effect.scoped))
      expect(bad.message).toContain("leaseTimeoutMs (30000) must be greater than leaseHeartbeatMs (30000)")
      expect(fs.existsSync("unused.db")).toBe(false)
    }))
})

interface Held {
  readonly pid: number
  /** Let the child carry on from its kill point. */
  readonly release: Effect.Effect<void>
  readonly kill: Effect.Effect<void>
  readonly exit: Effect.Effect<{ readonly code: number | null; readonly signal: NodeJS.Signals | null; readonly stdout: string }>
}

/** Start the child runner with RX_CHILD_HOLD=1 and wait until it holds at its kill point. */
const holdChild = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const reached = yield* Deferred.make<void, string>()
    const exited = yield* Deferred.make<{ readonly code: number | null; readonly signal: NodeJS.Signals | null; readonly stdout: string }>()
    const proc = yield* Effect.acquireRelease(
      Effect.sync(() => spawn(process.execPath, [child, ...args], { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, RX_CHILD_HOLD: "1" } })),
      (proc) => Effect.sync(() => proc.kill("SIGKILL"))
    )
    let stdout = ""
    proc.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk
      if (stdout.includes("KILLPOINT\n")) Deferred.unsafeDone(reached, Exit.void)
    })
    proc.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk
    })
    proc.on("exit", (code, signal) => {
      Deferred.unsafeDone(reached, Exit.fail(`exited before its kill point: ${stdout}`))
      Deferred.unsafeDone(exited, Exit.succeed({ code, signal, stdout }))
    })
    yield* Deferred.await(reached).pipe(Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => `no kill point: ${stdout}` }))
    return {
      pid: proc.pid ?? 0,
      release: Effect.sync(() => proc.stdin.write("go\n")),
      kill: Effect.sync(() => proc.kill("SIGKILL")),
      exit: Deferred.await(exited)
    } satisfies Held
  })

/** Run the child to its end (not held). */
const runChild = (args: ReadonlyArray<string>) =>
  Effect.async<{ readonly code: number | null; readonly stdout: string }>((resume) => {
    const proc = spawn(process.execPath, [child, ...args], { stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    proc.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    proc.stderr.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    proc.on("exit", (code) => resume(Effect.succeed({ code, stdout })))
    return Effect.sync(() => proc.kill("SIGKILL"))
  })

const loadLog = (db: string, goalId: string) =>
  Effect.flatMap(StateStore.StateStore, (s) => s.load(goalId)).pipe(Effect.provide(Layer.fresh(SqliteStore.layer({ filename: db }))))

describe("leases across processes", () => {
  // Iteration 1 calls the non-idempotent `append`, iteration 2 the idempotent `echo`.
  for (const iteration of [1, 2]) {
    it.scopedLive(`a runner resuming while another process is inside a tool call (iteration ${iteration}) stops busy at once`, () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const db = path.join(dir, "rx.db")
        const ledger = path.join(dir, "ledger")
        const goalId = `g-held-${iteration}`
        const holder = yield* holdChild([db, goalId, ledger, "run", "during", String(iteration)])

        // Here: Runner.resume sees the pending ToolStarted, but stops at the lease.
        const started = Date.now()
        const busy = yield* Effect.flip(Runner.resume(goalId).pipe(Effect.provide(echoRun(0)), Effect.provide(SqliteStore.layer({ filename: db }))))
        // At once, not after the lease would expire (30 s): generous for a loaded machine.
        expect(Date.now() - started).toBeLessThan(15_000)
        expect(busy._tag).toBe("@rx/kernel/GoalBusy")
        expect(busy.message).toContain(`goal ${goalId} is being run elsewhere (pid ${holder.pid} on host ${os.hostname()}, since `)
        expect(busy.message).toContain("this runner stopped")

        // In another process: the child exits busy (code 3).
        const other = yield* runChild([db, goalId, ledger, "resume"])
        expect(other.code, other.stdout).toBe(3)
        expect(other.stdout).toContain(`is being run elsewhere (pid ${holder.pid} on host`)

        yield* holder.release
        const exit = yield* holder.exit
        expect([exit.code, exit.stdout.includes("RESULT done")], exit.stdout).toEqual([0, true])
        const events = yield* loadLog(db, goalId)
        expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
        expect(events.some((e) => e._tag === "ToolFailed" && e.error.kind === "unknown")).toBe(false)
        expect(endsOnce(events)).toBe(true)
        // Each call ran once: nobody ran the held call a second time.
        const ledgerLines = fs.readFileSync(ledger, "utf8").split("\n").filter((l) => l !== "")
        expect(new Set(ledgerLines).size).toBe(ledgerLines.length)
        expect((yield* Replay.verify(events)).reason).toBe("done")
        expect(yield* leaseRows(goalId).pipe(Effect.provide(Layer.fresh(SqliteStore.layerClient({ filename: db }))))).toEqual([])
      }).pipe(Effect.scoped), 60_000)
  }

  it.scopedLive("runner names a live holder in another process to a read-only store, and none once it is killed with SIGKILL", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const db = path.join(dir, "rx.db")
      const goalId = "g-followed"
      const holder = yield* holdChild([db, goalId, path.join(dir, "ledger"), "run", "during", "1"])
      // A follower (rx events --follow) opens the log read-only and asks who runs the goal.
      const reader = yield* Layer.build(SqliteStore.layer({ filename: db, readonly: true }))
      const held = yield* runner(goalId).pipe(Effect.provide(reader))
      expect(Option.getOrUndefined(held)).toContain(`pid ${holder.pid} on host ${os.hostname()}, since `)
      yield* holder.kill
      expect((yield* holder.exit).signal).toBe("SIGKILL")
      // Its row stays, and counts for no one: the same open store says so at once.
      const rows = yield* leaseRows(goalId).pipe(Effect.provide(Layer.fresh(SqliteStore.layerClient({ filename: db }))))
      expect(rows.map((r) => r.pid)).toEqual([holder.pid])
      expect(yield* runner(goalId).pipe(Effect.provide(reader))).toEqual(Option.none())
      expect(yield* runner(goalId).pipe(Effect.provide(Layer.fresh(SqliteStore.layer({ filename: db }))))).toEqual(Option.none())
    }).pipe(Effect.scoped), 60_000)

  it.scopedLive("a holder killed with SIGKILL leaves its row, which does not block: resume takes over and finishes", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const db = path.join(dir, "rx.db")
      const ledger = path.join(dir, "ledger")
      const goalId = "g-killed"
      const holder = yield* holdChild([db, goalId, ledger, "run", "during", "2"])
      yield* holder.kill
      expect((yield* holder.exit).signal).toBe("SIGKILL")
      const rows = yield* leaseRows(goalId).pipe(Effect.provide(Layer.fresh(SqliteStore.layerClient({ filename: db }))))
      expect(rows.map((r) => r.pid)).toEqual([holder.pid])
      const resumed = yield* runChild([db, goalId, ledger, "resume"])
      expect(resumed.code, resumed.stdout).toBe(0)
      const events = yield* loadLog(db, goalId)
      expect(endsOnce(events)).toBe(true)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }).pipe(Effect.scoped), 60_000)
})

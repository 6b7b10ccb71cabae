/**
 * Golden databases: the SQLite log a released rx wrote (`packages/kernel/test/logs/<version>/`,
 * made by `record.mjs` there) must stay usable with today's `rx`, as a user would use it: list,
 * inspect, events and replay every goal, and resume the goal left open. Each test works on a
 * copy of the database in a temp folder. Every version folder is picked up.
 */
import { describe, expect, it } from "@effect/vitest"
import { Event } from "@rx/kernel"
import { Effect, Either } from "effect"
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx } from "./helpers.js"

const root = join(import.meta.dirname, "..", "..", "kernel", "test", "logs")
const versions = readdirSync(root).filter((name) => statSync(join(root, name)).isDirectory()).sort()

interface Goal {
  readonly name: string
  readonly goalId: string
  readonly events: number
  /** The recorded end, or "open". */
  readonly reason: string
}
interface Manifest {
  readonly rx: string
  readonly eventVersion: number
  readonly db: string
  readonly goals: ReadonlyArray<Goal>
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The recording's manifest, checked field by field (a broken one fails loudly). */
const manifestOf = (version: string): Manifest => {
  const path = join(root, version, "manifest.json")
  const m: unknown = JSON.parse(readFileSync(path, "utf8"))
  if (!isRecord(m) || typeof m.rx !== "string" || typeof m.eventVersion !== "number" || typeof m.db !== "string" || !Array.isArray(m.goals)) {
    throw new Error(`${path}: not a golden-log manifest`)
  }
  const goals = m.goals.map((g: unknown): Goal => {
    if (!isRecord(g) || typeof g.name !== "string" || typeof g.goalId !== "string" || typeof g.events !== "number" || typeof g.reason !== "string") {
      throw new Error(`${path}: a goal entry is malformed`)
    }
    return { name: g.name, goalId: g.goalId, events: g.events, reason: g.reason }
  })
  return { rx: m.rx, eventVersion: m.eventVersion, db: m.db, goals }
}

/** Decode JSON lines as events of `eventVersion`; throws naming the first bad line. */
const decodeLines = (text: string, eventVersion: number, what: string): ReadonlyArray<Event.Event> =>
  text.split("\n").filter((line) => line.trim() !== "").map((line, i) =>
    Either.getOrThrowWith(Event.decodeJson(line, eventVersion), (error) => new Error(`${what}, line ${i + 1}: ${error}`))
  )

/** A copy of the version's database in a fresh temp folder, with a workspace like the recording's. */
const copy = (version: string, manifest: Manifest) => {
  const dir = mkdtempSync(join(tmpdir(), "rx-golden-"))
  const db = join(dir, manifest.db)
  copyFileSync(join(root, version, manifest.db), db)
  const workspace = join(dir, "ws")
  mkdirSync(join(workspace, "docs"), { recursive: true })
  writeFileSync(join(workspace, "hello.txt"), "hello from the workspace\n")
  writeFileSync(join(workspace, "docs", "guide.md"), "# Guide\n\nRead hello.txt first, then write notes.txt.\n")
  return { db, workspace }
}

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })

describe("golden databases through the rx binary", () => {
  it("exist: at least one version folder", () => {
    expect(versions.length).toBeGreaterThan(0)
  })

  for (const version of versions) {
    describe(version, () => {
      const manifest = manifestOf(version)
      const golden = (goal: Goal) => decodeLines(readFileSync(join(root, version, `${goal.name}.jsonl`), "utf8"), manifest.eventVersion, `${goal.name}.jsonl`)

      it("the manifest lists goals, each with its log", () => {
        expect(manifest.goals.length).toBeGreaterThan(0)
        for (const goal of manifest.goals) expect(golden(goal).length).toBe(goal.events)
      })

      it.live("rx list shows every goal with its status and reason", () =>
        Effect.gen(function*() {
          const { db } = copy(version, manifest)
          const listed = yield* rx(["list", "--json", "--db", db])
          expect(listed.stderr).toBe("")
          expect(listed.code).toBe(0)
          const rows = jsonLines(listed.stdout)
          const seen = new Map(rows.map((row) => [String(row["goalId"]), row]))
          expect([...seen.keys()].sort()).toEqual(manifest.goals.map((g) => g.goalId).sort())
          for (const goal of manifest.goals) {
            const row = seen.get(goal.goalId)
            expect(row?.["status"], goal.name).toBe(goal.reason === "open" ? "open" : "terminated")
            expect(row?.["reason"], goal.name).toBe(goal.reason === "open" ? null : goal.reason)
            expect(row?.["nextSeq"], goal.name).toBe(goal.events)
          }
          const human = yield* rx(["list", "--db", db])
          expect(human.code).toBe(0)
          for (const goal of manifest.goals) expect(human.stdout).toContain(goal.goalId)
        }), 60_000)

      for (const goal of manifest.goals) {
        it.live(`${goal.name}: rx events, inspect and replay (${goal.reason})`, () =>
          Effect.gen(function*() {
            const { db } = copy(version, manifest)
            const expected = golden(goal)

            // rx events prints today's encoding; it decodes to the very events of the golden log.
            const events = yield* rx(["events", goal.goalId, "--db", db])
            expect(events.stderr).toBe("")
            expect(events.code).toBe(0)
            expect(decodeLines(events.stdout, Event.version, "rx events")).toEqual(expected)

            const inspected = yield* rx(["inspect", goal.goalId, "--db", db])
            expect(inspected.stderr).toBe("")
            expect(inspected.code).toBe(0)
            expect(inspected.stdout).toContain(goal.goalId)
            expect(inspected.stdout).toContain(goal.reason === "open" ? "status    open" : `terminated (${goal.reason})`)

            const replayed = yield* rx(["replay", goal.goalId, "--db", db])
            if (goal.reason !== "open") {
              expect(replayed.stdout).toContain(`identical, ${goal.events} events, no live calls (${goal.reason})`)
              expect(replayed.code).toBe(0)
            } else {
              // An open goal: every recorded event verifies, but there is no end to reproduce, so
              // An open goal's log verifies as far as it goes: said plainly, exit 0, no divergence.
              expect(replayed.stdout).toContain(`still open, so its log is incomplete; its ${goal.events} events verify`)
              expect(replayed.stdout).not.toContain("diverged")
              expect(replayed.code).toBe(0)
            }
          }), 60_000)
      }

      for (const goal of manifest.goals.filter((g) => g.reason === "open")) {
        it.scopedLive(`${goal.name}: rx resume completes the open goal, and rx replay verifies the whole log`, () =>
          Effect.gen(function*() {
            const { db, workspace } = copy(version, manifest)
            const server = yield* FakeServer.make([call("read_file", { path: "docs/guide.md" }), call("done", { summary: "resumed and finished" })])
            // The recorded server and workspace are gone: the flags override them (the model name is the recorded one).
            const resumed = yield* rx(["resume", goal.goalId, "--db", db, "--workspace", workspace, "--base-url", server.baseUrl, "--json"])
            expect(resumed.stderr).toBe("")
            expect(resumed.code).toBe(0)
            expect(server.received.map((r) => r.invalid)).toEqual([undefined, undefined])
            expect(server.received.map((r) => (isRecord(r.body) ? r.body["model"] : undefined))).toEqual(["golden-model", "golden-model"])

            const events = yield* rx(["events", goal.goalId, "--db", db])
            expect(events.code).toBe(0)
            const log = decodeLines(events.stdout, Event.version, "rx events")
            // The old part is untouched, the new part continues it, and the goal keeps its behaviour.
            expect(log.slice(0, goal.events)).toEqual(golden(goal))
            const first = log[0]
            const recorded = golden(goal)[0]
            expect(first?._tag === "GoalSubmitted" ? first.behaviour : undefined).toBe(recorded?._tag === "GoalSubmitted" ? recorded.behaviour : "none")
            // A resume with other settings than recorded may record them first (OptionsChanged).
            const added = log.slice(goal.events)
            const changed = added[0]?._tag === "OptionsChanged" ? added[0] : undefined
            if (changed !== undefined) expect(changed.options.settings).toMatchObject({ workspace, baseUrl: server.baseUrl, model: "golden-model" })
            expect(added.slice(changed === undefined ? 0 : 1).map((e) => e._tag)).toEqual([
              "ModelResponded", "ToolStarted", "ToolSucceeded", "IterationCompleted",
              "ModelResponded", "IterationCompleted", "Terminated"
            ])
            expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i))
            const last = log[log.length - 1]
            expect(last?._tag === "Terminated" ? last.reason : undefined).toBe("done")

            const replayed = yield* rx(["replay", goal.goalId, "--db", db])
            expect(replayed.stdout).toContain(`identical, ${log.length} events, no live calls (done)`)
            expect(replayed.code).toBe(0)
          }), 60_000)
      }
    })
  }
})

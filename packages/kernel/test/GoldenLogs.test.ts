/**
 * Golden logs: real logs written by released rx versions (`test/logs/<version>/*.jsonl`, made by
 * `test/logs/record.mjs`) must stay readable and replayable by today's kernel. Every version
 * folder is picked up; one without logs or without its `manifest.json` fails.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { Event, Replay, State } from "@rx/kernel"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"

const root = join(import.meta.dirname, "logs")
const versions = readdirSync(root).filter((name) => statSync(join(root, name)).isDirectory()).sort()
const logsOf = (version: string) => readdirSync(join(root, version)).filter((name) => name.endsWith(".jsonl")).sort()

/** What the recording wrote beside the logs; only the event encoding version is needed here. */
interface Manifest {
  readonly rx: string
  readonly eventVersion: number
}
const manifestOf = (version: string): Manifest => {
  const parsed: unknown = JSON.parse(readFileSync(join(root, version, "manifest.json"), "utf8"))
  if (typeof parsed !== "object" || parsed === null || !("eventVersion" in parsed) || typeof parsed.eventVersion !== "number") {
    throw new Error(`test/logs/${version}/manifest.json has no eventVersion`)
  }
  return { rx: "rx" in parsed && typeof parsed.rx === "string" ? parsed.rx : "?", eventVersion: parsed.eventVersion }
}

/** A log file's lines, each decoded as today's rx decodes a log of `eventVersion`; fails naming the first bad line. */
const load = (path: string, eventVersion: number) =>
  Effect.gen(function*() {
    const lines = readFileSync(path, "utf8").split("\n").filter((line) => line.trim() !== "")
    const events: Array<Event.Event> = []
    for (const [index, line] of lines.entries()) {
      const decoded = Event.decodeJson(line, eventVersion)
      if (Either.isLeft(decoded)) return yield* Effect.dieMessage(`${path}:${index + 1} does not decode: ${decoded.left}`)
      events.push(decoded.right)
    }
    return { lines, events }
  })

describe("golden logs", () => {
  it("exist: at least one version folder", () => {
    expect(versions.length).toBeGreaterThan(0)
  })

  for (const version of versions) {
    describe(version, () => {
      const files = logsOf(version)
      // Read lazily: a missing manifest fails its tests, not the whole file's collection.
      const eventVersion = () => manifestOf(version).eventVersion

      it("the folder holds logs and a manifest", () => {
        // A folder without logs is a broken recording, not a pass.
        expect(files, `no .jsonl file in test/logs/${version}`).not.toEqual([])
        expect(Number.isInteger(eventVersion())).toBe(true)
      })

      for (const file of files) {
        const path = join(root, version, file)

        it.effect(`${file}: decodes into one well-formed log, which State folds`, () =>
          Effect.gen(function*() {
            const { events, lines } = yield* load(path, eventVersion())
            const first = events[0]
            expect(first?._tag).toBe("GoalSubmitted")
            if (first?._tag !== "GoalSubmitted") return
            expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
            expect(new Set(events.map((e) => e.goalId))).toEqual(new Set([first.goalId]))
            // A log written before the behaviour field (rx 0.1) runs under behaviour 1.
            const raw: unknown = JSON.parse(lines[0] ?? "{}")
            if (typeof raw === "object" && raw !== null && !("behaviour" in raw)) expect(first.behaviour).toBe(1)
            const terminations = events.filter((e) => e._tag === "Terminated")
            expect(terminations.length).toBeLessThanOrEqual(1)
            if (terminations.length === 1) expect(events[events.length - 1]?._tag).toBe("Terminated")
            const state = State.fromEvents(first.goalId, events)
            expect(state.seq).toBe(events.length)
            expect(state.goal).toBe(first.goal)
            const end = terminations[0]
            expect(state.terminated).toEqual(end === undefined ? null : { reason: end.reason, detail: end.detail })
          }))

        const ended = readFileSync(path, "utf8").includes("\"_tag\":\"Terminated\"")
        if (ended) {
          it.effect(`${file}: replays identically, with the recorded reason`, () =>
            Effect.gen(function*() {
              const { events } = yield* load(path, eventVersion())
              const end = events[events.length - 1]
              const first = events[0]
              if (end?._tag !== "Terminated" || first === undefined) return yield* Effect.dieMessage(`${file} does not end with Terminated`)
              const checked = yield* Replay.check(events)
              expect(checked._tag).toBe("Complete")
              const replayed = yield* Replay.verify(events)
              expect(replayed.reason).toBe(end.reason)
              // Wording may change between versions (that is no divergence); counters and fingerprints may not.
              expect(State.summary(replayed.state)).toEqual(State.summary(State.fromEvents(first.goalId, events)))
            }))
        } else {
          // An open log (rx killed between steps, never resumed) has no end to reproduce:
          // Replay.check verifies it as far as it goes, and Replay.verify, which promises a
          // terminated run, refuses it naming how much verified. (Until 9c50e37, verify ran one
          // step past the end and reported a NonDeterminism at seq = length.)
          it.effect(`${file} (open): replay verifies every recorded event and stops at the end`, () =>
            Effect.gen(function*() {
              const { events } = yield* load(path, eventVersion())
              const first = events[0]
              const checked = yield* Replay.check(events)
              expect(checked).toEqual({ _tag: "Open", goalId: first?.goalId, events: events.length })
              const error = yield* Effect.flip(Replay.verify(events))
              expect(error._tag).toBe("@rx/kernel/ReplayError")
              expect(error.message).toContain(`still open: its ${events.length} events verify`)
            }))
        }
      }
    })
  }
})

describe("rx 0.1 logs of goals today's kernel refuses at submission", () => {
  // rx 0.1 took an empty goal, or one longer than a prompt shows (and cut it): its logs still replay.
  for (const [name, goal] of [["an empty goal", ""], ["a goal longer than a prompt shows", "x".repeat(100_000)]] as const) {
    it.effect(`${name} replays`, () =>
      Effect.gen(function*() {
        const version = "v0.1"
        const { events } = yield* load(join(root, version, "max-iterations.jsonl"), manifestOf(version).eventVersion)
        const [first, ...rest] = events
        if (first?._tag !== "GoalSubmitted") return yield* Effect.dieMessage("max-iterations.jsonl does not start with GoalSubmitted")
        expect(first.behaviour).toBe(1)
        const replayed = yield* Replay.verify([{ ...first, goal }, ...rest])
        expect(replayed.reason).toBe("max_iterations")
      }))
  }
})

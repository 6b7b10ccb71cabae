import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { canonical } from "../src/internal/json.js"
import { record, resumeCut, script } from "./scripts.js"

describe("Runner.resume", () => {
  it.effect.prop(
    "a log cut at any commit resumes to the uncut run's end; no completed call runs again",
    [script],
    ([s]) =>
      Effect.gen(function*() {
        const full = yield* record(s)
        for (const cut of full.boundaries.filter((b) => b < full.events.length)) {
          const prefix = full.events.slice(0, cut)
          const resumed = yield* resumeCut(s, full.events, cut, full.ledger)
          expect(resumed.events.slice(0, cut)).toEqual(prefix)
          const last = prefix[prefix.length - 1]
          const insideCall = last?._tag === "ToolStarted" ? last : undefined
          // Calls completed before the cut never run again.
          const completed = new Set(prefix.flatMap((e) => (e._tag === "ToolSucceeded" || e._tag === "ToolFailed" ? [e.callId] : [])))
          for (const entry of resumed.ledger) expect(completed.has(entry.slice(0, entry.lastIndexOf(":")))).toBe(false)
          for (const entry of resumed.ledger) expect(entry.slice(0, entry.lastIndexOf(":"))).not.toBe(insideCall?.callId)
          if (insideCall?.tool === "append") {
            // A non-idempotent call cut in the middle is not run again: its outcome is unknown.
            const outcome = resumed.events[cut]
            expect(outcome).toMatchObject({ _tag: "ToolFailed", callId: insideCall.callId, error: { kind: "unknown" } })
          } else {
            expect(canonical(resumed.result.state)).toBe(canonical(full.result.state))
            expect(resumed.events.map((e) => e._tag)).toEqual(full.events.map((e) => e._tag))
          }
          expect(resumed.events.filter((e) => e._tag === "Terminated")).toHaveLength(1)
          expect(resumed.events.at(-1)?._tag).toBe("Terminated")
        }
      }),
    { fastCheck: { numRuns: 40 } }
  )
})

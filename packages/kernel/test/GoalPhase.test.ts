import { describe, expect, it } from "@effect/vitest"
import { GoalSummary } from "../src/index.js"

const open = { status: "open", reason: null, suspended: null, approval: null } as const

describe("GoalSummary.phase", () => {
  it("tells a running goal from an idle one by its lease, and names what a waiting one waits on", () => {
    expect(GoalSummary.phase({ ...open, status: "terminated", reason: "done" }, false)).toEqual({ _tag: "terminated", reason: "done" })
    expect(GoalSummary.phase(open, true)).toEqual({ _tag: "running" })
    // Open, nothing suspended it, and no runner holds it: killed or stopped.
    expect(GoalSummary.phase(open, false)).toEqual({ _tag: "idle", why: "stopped" })
    expect(GoalSummary.phase({ ...open, approval: { callId: "g:1" } }, true)).toEqual({ _tag: "waiting", on: "approval" })
    expect(GoalSummary.phase({ ...open, suspended: { reason: "awaiting_approval", child: "c" } }, false)).toEqual({ _tag: "waiting", on: "sub-goal", child: "c" })
    expect(GoalSummary.phase({ ...open, suspended: { reason: "model_unavailable" } }, false)).toEqual({ _tag: "waiting", on: "outage" })
    expect(GoalSummary.phase({ ...open, suspended: { reason: "shutdown" } }, false)).toEqual({ _tag: "idle", why: "shutdown" })
    expect(GoalSummary.phase({ ...open, suspended: { reason: "awaiting_approval" } }, false)).toEqual({ _tag: "idle", why: "decided" })
    // A runner that took the goal up again runs it, whatever its last runner recorded.
    expect(GoalSummary.phase({ ...open, suspended: { reason: "shutdown" } }, true)).toEqual({ _tag: "running" })
  })
})

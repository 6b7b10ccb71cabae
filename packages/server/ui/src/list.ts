/** The goals: status, text, iterations, age; filtered by status; refreshed every two seconds while shown. */
import * as Api from "./api.js"
import { age, fill, h, preview } from "./dom.js"
import type { Goal } from "./types.js"

const filters: ReadonlyArray<readonly [string, string]> = [["", "all"], ["open", "open"], ["waiting", "waiting for approval"], ["terminated", "terminated"]]
const refreshMs = 2_000

/** A goal's status as a badge: open (running, queued), waiting, suspended (why), terminated (why). */
export const badge = (goal: Pick<Goal, "status" | "reason" | "suspended" | "activity">): HTMLElement => {
  if (goal.status === "terminated") return h("span", { class: `badge ${goal.reason === "done" ? "ok" : "bad"}` }, `terminated: ${goal.reason ?? "?"}`)
  if (goal.status === "waiting") return h("span", { class: "badge wait" }, "waiting for approval")
  if (goal.activity === "idle" && goal.suspended !== null) return h("span", { class: "badge wait" }, `suspended: ${goal.suspended.reason}`)
  return h("span", { class: "badge open" }, goal.activity === "idle" ? "open" : goal.activity)
}

export const show = (root: HTMLElement, status: string, signal: AbortSignal) => {
  const rows = h("tbody", {})
  const note = h("p", { class: "muted" })
  const bar = h("nav", { class: "filters" }, ...filters.map(([value, label]) =>
    h("a", { href: `#/${value === "" ? "" : `?status=${value}`}`, class: value === status ? "on" : "" }, label)))
  fill(root, bar, h("table", { class: "goals" }, h("thead", {}, h("tr", {}, ...["goal", "status", "text", "iterations", "submitted"].map((c) => h("th", {}, c)))), rows), note)
  const draw = (goals: ReadonlyArray<Goal>, more: boolean) => {
    fill(rows, ...goals.map((g) =>
      h("tr", { id: `goal-${g.goalId}` },
        h("td", {}, h("a", { href: `#/goals/${encodeURIComponent(g.goalId)}`, class: "mono" }, g.goalId)),
        h("td", {}, badge(g)),
        h("td", { title: preview(g.goal, 1_000) }, preview(g.goal, 100)),
        h("td", { class: "num" }, g.iterations),
        h("td", { title: new Date(g.submittedAt).toISOString() }, age(g.submittedAt)))))
    fill(note, goals.length === 0 ? "No goals yet: submit one with rx run --server or POST /v1/goals." : more ? "The newest 100 are shown." : "")
  }
  const refresh = async () => {
    while (!signal.aborted) {
      try {
        const page = await Api.list(status)
        if (!signal.aborted) draw(page.goals, page.cursor !== null)
      } catch (error) {
        if (!signal.aborted) fill(note, `Cannot list the goals: ${error instanceof Error ? error.message : String(error)}`)
      }
      await new Promise((resolve) => setTimeout(resolve, refreshMs))
    }
  }
  void refresh()
}

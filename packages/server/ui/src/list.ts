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
  // Open, yet nothing runs it (its runner stopped): not to be taken for a running goal.
  if (goal.activity === "idle") return h("span", { class: "badge wait", title: "open, and nothing runs it: Resume on its page" }, "idle: nothing runs it")
  return h("span", { class: "badge open" }, goal.activity)
}

/** The built-in tools, whose approval the form sets (auto: runs; ask: waits for a person; deny: never runs). */
const tools = ["shell", "write_file", "edit_file", "http_fetch", "read_file", "list_dir", "find_files", "search_text"]

/**
 * Submit a goal: its text, the folder (under the server's workspace root) it works in, standing
 * instructions, and the approval policy. The server checks it as it checks any submission, and
 * its message is shown as it is; a retry of the same form is the same goal (Idempotency-Key).
 */
const submitForm = () => {
  const text = h("textarea", { id: "new-goal-text", attrs: { rows: "3", "aria-label": "goal", placeholder: "What should the agent achieve?", required: "" } })
  const workspace = h("input", { id: "new-goal-workspace", attrs: { type: "text", "aria-label": "workspace folder", placeholder: "folder under the server's workspace root (empty: the root)" } })
  const instructions = h("textarea", { id: "new-goal-instructions", attrs: { rows: "2", "aria-label": "instructions", placeholder: "standing instructions (optional)" } })
  const policy = tools.map((tool) => {
    const select = h("select", { attrs: { name: `approval-${tool}`, "aria-label": `approval for ${tool}` } },
      ...["auto", "ask", "deny"].map((p) => h("option", { attrs: { value: p } }, p)))
    return { tool, select, label: h("label", { class: "policy" }, h("span", { class: "mono" }, tool), select) }
  })
  const problem = h("p", { class: "problem", id: "new-goal-problem" })
  const button = h("button", { class: "primary", id: "new-goal-submit", attrs: { type: "submit" } }, "Submit")
  const form = h("form", { class: "submit" },
    text, workspace, instructions,
    h("details", { class: "approval-policy" }, h("summary", {}, "Approval policy (auto unless set)"), h("div", { class: "policies" }, ...policy.map((p) => p.label))),
    h("div", { class: "actions" }, button, problem))
  // Another form content is another submission.
  const key = Api.idempotencyKey(form)
  form.addEventListener("submit", (event) => {
    event.preventDefault()
    const goal = text.value
    if (goal.trim() === "") return fill(problem, "The goal needs a text.")
    const approval = Object.fromEntries(policy.filter((p) => p.select.value !== "auto").map((p) => [p.tool, p.select.value as "ask" | "deny"]))
    const body: Api.Submission = {
      goal,
      ...(workspace.value.trim() === "" ? {} : { workspace: workspace.value.trim() }),
      ...(instructions.value.trim() === "" ? {} : { instructions: instructions.value }),
      ...(Object.keys(approval).length === 0 ? {} : { options: { approval } })
    }
    button.setAttribute("disabled", "")
    fill(problem)
    Api.submit(body, key.current()).then(({ goalId }) => {
      location.hash = `#/goals/${encodeURIComponent(goalId)}`
    }, (error: unknown) => {
      button.removeAttribute("disabled")
      fill(problem, `Not submitted: ${error instanceof Error ? error.message : String(error)}`)
    })
  })
  return h("details", { class: "new-goal", id: "new-goal" }, h("summary", {}, "Submit a goal"), form)
}

/** The goal a goal is shown under: the one that delegated it, or the one it was forked from. */
const above = (g: Goal): string | null => g.parent ?? g.forkedFrom?.goalId ?? null

/** The goals in list order, each goal's sub-goals and forks (those on the page) right after it, oldest first, with their depth. */
export const tree = (goals: ReadonlyArray<Goal>): ReadonlyArray<readonly [Goal, number]> => {
  const ids = new Set(goals.map((g) => g.goalId))
  const below = new Map<string, Array<Goal>>()
  for (const g of goals) {
    const over = above(g)
    if (over !== null && ids.has(over)) below.set(over, [g, ...(below.get(over) ?? [])])
  }
  const out: Array<readonly [Goal, number]> = []
  const visit = (g: Goal, depth: number) => {
    out.push([g, depth])
    for (const next of below.get(g.goalId) ?? []) visit(next, depth + 1)
  }
  for (const g of goals) {
    const over = above(g)
    if (over === null || !ids.has(over)) visit(g, 0)
  }
  return out
}

/** How a nested row hangs from the one above it: └ for a sub-goal, ⑂ for a fork. */
const branch = (g: Goal, depth: number) =>
  g.parent === null && g.forkedFrom !== null
    ? h("span", { class: "tree fork", title: `fork of ${g.forkedFrom.goalId} at step ${g.forkedFrom.iteration}` }, `${"\u00a0\u00a0".repeat(depth - 1)}⑂\u00a0`)
    : h("span", { class: "tree", title: `sub-goal of ${g.parent ?? "?"}` }, `${"\u00a0\u00a0".repeat(depth - 1)}└\u00a0`)

export const show = (root: HTMLElement, status: string, signal: AbortSignal) => {
  const rows = h("tbody", {})
  const note = h("p", { class: "muted" })
  const bar = h("nav", { class: "filters" }, ...filters.map(([value, label]) =>
    h("a", { href: `#/${value === "" ? "" : `?status=${value}`}`, class: value === status ? "on" : "" }, label)))
  fill(root, submitForm(), bar, h("table", { class: "goals" }, h("thead", {}, h("tr", {}, ...["goal", "status", "text", "iterations", "submitted"].map((c) => h("th", {}, c)))), rows), note)
  const draw = (goals: ReadonlyArray<Goal>, more: boolean) => {
    fill(rows, ...tree(goals).map(([g, depth]) =>
      h("tr", { id: `goal-${g.goalId}`, class: depth === 0 ? "" : g.parent === null ? "fork" : "sub-goal" },
        h("td", {},
          depth === 0 ? "" : branch(g, depth),
          h("a", { href: `#/goals/${encodeURIComponent(g.goalId)}`, class: "mono" }, g.goalId)),
        h("td", {}, badge(g)),
        h("td", { title: preview(g.goal, 1_000) }, preview(g.goal, 100)),
        h("td", { class: "num" }, g.iterations),
        h("td", { title: new Date(g.submittedAt).toISOString() }, age(g.submittedAt)))))
    fill(note, goals.length === 0 ? "No goals yet: submit one above, with rx run --server, or POST /v1/goals." : more ? "The newest 100 are shown." : "")
  }
  const refresh = async () => {
    while (!signal.aborted) {
      try {
        const page = await Api.list(status)
        if (!signal.aborted) draw(page.goals, page.cursor !== null)
      } catch (error) {
        // A server that does not answer is said at the top of the page; the list tries again.
        if (!signal.aborted && !Api.unreachable(error)) fill(note, `Cannot list the goals: ${error instanceof Error ? error.message : String(error)}`)
      }
      await new Promise((resolve) => setTimeout(resolve, refreshMs))
    }
  }
  void refresh()
}

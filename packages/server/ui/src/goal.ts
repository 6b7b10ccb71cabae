/**
 * One goal: its steps as they happen, the tool trace, a timeline of where time went, the
 * termination audit, the raw events (downloadable as JSON lines), and the actions: cancel, and
 * approve or deny the call waiting, shown exactly as it will run.
 */
import * as Api from "./api.js"
import { age, append, block, download, duration, fill, h, preview } from "./dom.js"
import { badge } from "./list.js"
import type { Event, Goal, Of } from "./types.js"

/** Raw events listed in the page at most (all of them download). */
const rawShown = 500

interface Model {
  readonly goalId: string
  readonly events: Array<Event>
  readonly lines: Array<string>
  goal: Goal | undefined
}

/** Events by iteration, in order. */
const iterations = (events: ReadonlyArray<Event>): Map<number, Array<Event>> => {
  const by = new Map<number, Array<Event>>()
  for (const e of events) {
    const list = by.get(e.iteration)
    if (list === undefined) by.set(e.iteration, [e])
    else list.push(e)
  }
  return by
}

const row = (e: Event, label: string, cls: string, ...content: ReadonlyArray<Node | string>) =>
  h("div", { class: `event ${cls}`, id: `seq-${e.seq}` }, h("span", { class: "label" }, label), h("div", { class: "content" }, ...content))

/** One event in a step. */
const eventRow = (e: Event, goalId: string): HTMLElement | null => {
  switch (e._tag) {
    case "ModelResponded": {
      const calls = e.response.toolCalls
      return row(e, "model", "model",
        ...(e.response.text.trim() === "" ? [] : [h("p", { class: "thought" }, e.response.text)]),
        ...calls.map((c, i) => h("p", { class: "decision" }, calls.length > 1 ? `[${i}] ` : "", h("b", {}, c.name), " ", preview(c.arguments, 200))),
        h("p", { class: "muted" }, `${e.response.usage.inputTokens} tokens in, ${e.response.usage.outputTokens} out${e.response.finishReason === "length" ? ", cut off" : ""}`))
    }
    case "ModelFailed":
      return row(e, "model", "bad", h("p", {}, `failed: ${e.message}`))
    case "ActionRejected":
      return row(e, "rejected", "bad", h("p", {}, `${e.index === undefined ? "" : `[${e.index}] `}${e.kind}: ${e.reason}`), block(e.raw, `${goalId}-${e.seq}-raw`))
    case "ToolStarted":
      return row(e, "tool", "tool", h("p", {}, h("b", {}, e.tool), ` call ${e.callId}`), block(e.input, `${goalId}-${e.seq}-input`))
    case "ToolSucceeded":
      return row(e, "output", "ok", h("p", { class: "muted" }, `${e.tool} succeeded in ${duration(e.durationMs)}`), block(e.output, `${goalId}-${e.seq}-output`))
    case "ToolFailed":
      return row(e, "error", "bad", h("p", {}, `${e.tool} failed (${e.error.kind}) in ${duration(e.durationMs)}`), block(e.error.message, `${goalId}-${e.seq}-error`))
    case "ApprovalRequested":
      return row(e, "approval", "wait", h("p", {}, h("b", {}, e.tool), ` call ${e.callId} waits for a person's approval`), block(e.input, `${goalId}-${e.seq}-input`))
    case "ApprovalDecided":
      return row(e, "decided", e.approved ? "ok" : "bad", h("p", {}, `${e.approved ? "approved" : `denied (${e.reason})`} by ${e.by}, call ${e.callId}`))
    case "Suspended":
      return row(e, "suspended", "wait", h("p", {}, `${e.reason}: ${e.detail}`))
    case "CancelRequested":
      return row(e, "cancel", "bad", h("p", {}, e.reason))
    case "OptionsChanged":
      return row(e, "options", "muted", h("p", {}, "the goal's options changed"))
    case "Terminated":
      return row(e, "end", e.reason === "done" ? "ok" : "bad", h("p", {}, h("b", {}, e.reason), `: ${e.detail}`))
    case "GoalSubmitted":
    case "IterationCompleted":
      return null
  }
}

/** Where an iteration's time went: until the model answered, and in its tools. */
const timing = (events: ReadonlyArray<Event>, start: number) => {
  const answered = events.find((e) => e._tag === "ModelResponded" || e._tag === "ModelFailed")
  const tools = events.reduce((sum, e) => (e._tag === "ToolSucceeded" || e._tag === "ToolFailed" ? sum + e.durationMs : sum), 0)
  return { model: answered === undefined ? 0 : Math.max(0, answered.at - start), tools }
}

/** The start of each iteration: the time of the last event before it. */
const starts = (events: ReadonlyArray<Event>): Map<number, number> => {
  const at = new Map<number, number>()
  let previous = events[0]?.at ?? 0
  for (const e of events) {
    if (!at.has(e.iteration)) at.set(e.iteration, previous)
    previous = e.at
  }
  return at
}

const stepCard = (iteration: number, events: ReadonlyArray<Event>, start: number, goalId: string) => {
  const t = timing(events, start)
  return h("section", { class: "step", id: `step-${iteration}` },
    h("h3", {}, `Step ${iteration}`, h("span", { class: "muted" }, ` model ${duration(t.model)}, tools ${duration(t.tools)}`)),
    ...events.map((e) => eventRow(e, goalId)).filter((n): n is HTMLElement => n !== null))
}

const trace = (events: ReadonlyArray<Event>) => {
  const inputs = new Map(events.flatMap((e) => (e._tag === "ToolStarted" ? [[e.callId, e.input] as const] : [])))
  const done = events.filter((e): e is Of<"ToolSucceeded"> | Of<"ToolFailed"> => e._tag === "ToolSucceeded" || e._tag === "ToolFailed")
  return h("table", { class: "trace" },
    h("thead", {}, h("tr", {}, ...["step", "tool", "result", "duration", "input"].map((c) => h("th", {}, c)))),
    h("tbody", {}, ...done.map((e) =>
      h("tr", { class: e._tag === "ToolFailed" ? "bad" : "" },
        h("td", { class: "num" }, h("a", { href: `#seq-${e.seq}`, on: { click: (ev) => jump(ev, e.seq) } }, e.iteration)),
        h("td", {}, e.tool),
        h("td", {}, e._tag === "ToolSucceeded" ? "ok" : e.error.kind),
        h("td", { class: "num" }, duration(e.durationMs)),
        h("td", { class: "mono" }, preview(inputs.get(e.callId), 80))))))
}

const timeline = (events: ReadonlyArray<Event>) => {
  const start = starts(events)
  const rows = [...iterations(events)].filter(([i]) => i > 0).map(([i, list]) => ({ i, ...timing(list, start.get(i) ?? 0) }))
  const longest = Math.max(1, ...rows.map((r) => r.model + r.tools))
  const bar = (ms: number, cls: string) => {
    const span = h("span", { class: `bar ${cls}`, title: duration(ms) })
    span.style.width = `${(100 * ms) / longest}%`
    return span
  }
  return h("div", { class: "timeline" },
    h("p", { class: "legend" }, h("span", { class: "bar model key" }), " model ", h("span", { class: "bar tools key" }), " tools"),
    ...rows.map((r) =>
      h("div", { class: "lane" }, h("span", { class: "num" }, r.i), h("span", { class: "bars" }, bar(r.model, "model"), bar(r.tools, "tools")), h("span", { class: "muted" }, duration(r.model + r.tools)))))
}

const jump = (event: Event | MouseEvent, seq: number) => {
  if ("preventDefault" in event) event.preventDefault()
  document.getElementById(`seq-${seq}`)?.scrollIntoView({ block: "center" })
}

const auditView = (goal: Goal | undefined) => {
  const audit = goal?.audit
  if (audit === undefined) return h("p", { class: "muted" }, goal?.status === "terminated" ? "" : "The goal is open: it has not terminated.")
  return h("dl", { class: "audit" },
    h("dt", {}, "reason"), h("dd", {}, h("b", {}, audit.reason), ` (seq ${audit.seq}, ${new Date(audit.at).toISOString()})`),
    h("dt", {}, "detail"), h("dd", {}, audit.detail),
    h("dt", {}, "limit"), h("dd", {}, audit.limit),
    h("dt", {}, "led there"), h("dd", {}, ...audit.evidence.map((seq) => h("a", { href: `#seq-${seq}`, class: "chip", on: { click: (ev) => jump(ev, seq) } }, `seq ${seq}`))))
}

/** The call waiting for a decision, exactly as it will run, with approve and deny. */
const approvalPanel = (model: Model, refresh: () => void) => {
  const approval = model.goal?.approval
  if (model.goal?.status !== "waiting" || approval === null || approval === undefined) return null
  const reason = h("input", { attrs: { type: "text", placeholder: "why (told to the model when denied)", "aria-label": "reason" } })
  const status = h("span", { class: "muted" })
  const act = (approve: boolean) => async () => {
    fill(status, approve ? "approving…" : "denying…")
    try {
      await Api.decide(model.goalId, approval.callId, approve, approve ? undefined : reason.value)
      fill(status, approve ? "approved" : "denied")
      refresh()
    } catch (error) {
      fill(status, error instanceof Error ? error.message : String(error))
    }
  }
  return h("section", { class: "approval", id: "approval" },
    h("h2", {}, "Waiting for approval"),
    h("p", {}, "Call ", h("span", { class: "mono" }, approval.callId), " of ", h("b", {}, approval.tool), ", exactly as it will run if approved:"),
    block(approval.input, `${model.goalId}-approval`, "value exact"),
    h("div", { class: "actions" },
      h("button", { class: "primary", id: "approve", on: { click: act(true) } }, "Approve"),
      reason,
      h("button", { id: "deny", on: { click: act(false) } }, "Deny"),
      status))
}

export const show = (root: HTMLElement, goalId: string, signal: AbortSignal) => {
  const model: Model = { goalId, events: [], lines: [], goal: undefined }
  const head = h("div", { class: "head" })
  const approval = h("div", {})
  const steps = h("div", { class: "steps" })
  const traceBox = h("div", {})
  const timelineBox = h("div", {})
  const auditBox = h("div", {})
  const rawCount = h("span", { class: "muted" })
  const raw = h("details", { class: "raw" }, h("summary", {}, "Raw events ", rawCount))
  const rawList = h("div", {})
  append(raw, [
    h("button", { id: "download", on: { click: () => download(`${goalId}.jsonl`, `${model.lines.join("\n")}\n`, "application/x-ndjson") } }, "Download JSON lines"),
    rawList
  ])
  raw.addEventListener("toggle", () => drawRaw())
  const problem = h("p", { class: "problem" })
  fill(root,
    h("p", {}, h("a", { href: "#/" }, "← goals")),
    head, problem, approval,
    h("h2", {}, "Steps"), steps,
    h("h2", {}, "Tool trace"), traceBox,
    h("h2", {}, "Timeline"), timelineBox,
    h("h2", {}, "Termination audit"), auditBox,
    raw)

  const cards = new Map<number, HTMLElement>()
  const dirty = new Set<number>()
  let scheduled = false

  const drawHead = () => {
    const g = model.goal
    const submitted = model.events[0]
    const metadata = submitted?._tag === "GoalSubmitted" ? submitted.options.metadata : {}
    const cancel = g !== undefined && g.status !== "terminated"
      ? h("button", {
        id: "cancel",
        on: {
          click: async () => {
            if (!confirm(`Cancel goal ${goalId}?`)) return
            try {
              await Api.cancel(goalId)
              void refresh()
            } catch (error) {
              fill(problem, error instanceof Error ? error.message : String(error))
            }
          }
        }
      }, "Cancel")
      : null
    fill(head,
      h("h1", { title: g?.goal ?? "" }, preview(g?.goal ?? (submitted?._tag === "GoalSubmitted" ? submitted.goal : goalId), 300)),
      h("p", { class: "meta" },
        h("span", { class: "mono" }, goalId), " ",
        g === undefined ? "" : badge(g), " ",
        g === undefined ? "" : `${g.iterations} iterations, submitted ${age(g.submittedAt)}`,
        typeof metadata["model"] === "string" ? `, model ${metadata["model"]}` : "",
        typeof metadata["workspace"] === "string" ? `, in ${metadata["workspace"]}` : "",
        " ", cancel))
    fill(approval, approvalPanel(model, () => void refresh()))
    fill(auditBox, auditView(g))
  }

  const drawRaw = () => {
    fill(rawCount, `(${model.events.length})`)
    if (!raw.open) return
    const shown = model.lines.slice(-rawShown)
    fill(rawList,
      model.lines.length > rawShown ? h("p", { class: "muted" }, `The last ${rawShown} of ${model.lines.length}; the download has them all.`) : null,
      ...shown.map((line) => h("pre", { class: "line" }, line.length > 2_000 ? `${line.slice(0, 2_000)}… (${line.length.toLocaleString("en")} characters)` : line)))
  }

  const draw = () => {
    scheduled = false
    const by = iterations(model.events)
    const start = starts(model.events)
    for (const i of dirty) {
      if (i === 0) continue
      const card = stepCard(i, by.get(i) ?? [], start.get(i) ?? 0, goalId)
      const old = cards.get(i)
      if (old === undefined) steps.appendChild(card)
      else old.replaceWith(card)
      cards.set(i, card)
    }
    dirty.clear()
    fill(traceBox, trace(model.events))
    fill(timelineBox, timeline(model.events))
    drawRaw()
    drawHead()
  }

  const refresh = async () => {
    try {
      model.goal = await Api.goal(goalId)
      fill(problem)
    } catch (error) {
      fill(problem, error instanceof Error ? error.message : String(error))
    }
    drawHead()
  }

  void refresh()
  Api.follow(goalId, (event, line) => {
    model.events.push(event)
    model.lines.push(line)
    dirty.add(event.iteration)
    // The header follows what changes a goal's status.
    if (["ApprovalRequested", "ApprovalDecided", "Suspended", "CancelRequested", "Terminated", "IterationCompleted"].includes(event._tag)) void refresh()
    if (!scheduled) {
      scheduled = true
      requestAnimationFrame(draw)
    }
  }, signal).catch((error: unknown) => {
    if (!signal.aborted) fill(problem, `The events stopped: ${error instanceof Error ? error.message : String(error)}`)
  })
}

/**
 * One goal: its steps as they happen, the tool trace, a timeline of where time went, the
 * termination audit, the raw events (downloadable as JSON lines), and the actions: cancel, approve
 * or deny the call waiting (shown exactly as it will run), tell a running goal something, and
 * continue an ended one as a new goal.
 */
import * as Api from "./api.js"
import { age, append, block, download, duration, fill, h, preview } from "./dom.js"
import { badge } from "./list.js"
import type { Entry, Step } from "../../src/internal/entries.js"
import { steps as stepsOf } from "../../src/internal/steps.js"
import type { Event, Goal } from "./types.js"

/** Raw events listed in the page at most (all of them download). */
const rawShown = 500

interface Model {
  readonly goalId: string
  readonly events: Array<Event>
  readonly lines: Array<string>
  goal: Goal | undefined
  /** The sub-goals it delegated, oldest first. */
  children: ReadonlyArray<Goal>
  /** Its forks (`rx fork`), oldest first. */
  forks: ReadonlyArray<Goal>
}

/** A link to another goal's page. */
const goalLink = (goalId: string) => h("a", { href: `#/goals/${encodeURIComponent(goalId)}`, class: "mono goal-link" }, goalId)

/** An entry of a step (`View.Entry`, as `rx inspect` shows it), by its kind. */
type EntryOf<T extends Entry["_tag"]> = Extract<Entry, { readonly _tag: T }>

/** The events of a goal by seq: each row's raw event. */
type Raw = ReadonlyMap<number, Event>

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

/** The event itself, as recorded: one click away from what the row shows of it. */
const rawEvent = (e: Event | undefined) => {
  if (e === undefined) return null
  const details = h("details", { class: "raw-event" }, h("summary", {}, "raw event"))
  details.addEventListener("toggle", () => {
    if (!details.open || details.dataset["shown"] === "1") return
    details.dataset["shown"] = "1"
    details.appendChild(block(e, `${e.goalId}-${e.seq}-event`))
  }, { once: false })
  return details
}

const row = (raw: Raw, seq: number, label: string, cls: string, ...content: ReadonlyArray<Node | string | null>) =>
  h("div", { class: `event ${cls}`, id: `seq-${seq}` }, h("span", { class: "label" }, label), h("div", { class: "content" }, ...content, rawEvent(raw.get(seq))))

type Json = Readonly<Record<string, unknown>>
const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

/** A text block with a label (stdout, stderr, content), nothing when empty. */
const labelled = (label: string, text: unknown, name: string) =>
  typeof text === "string" && text !== "" ? h("div", { class: `stream ${label}` }, h("span", { class: "stream-label" }, label), block(text, name)) : null

/**
 * A tool's output as a person reads it: a command's exit and its stdout and stderr as text; a
 * file tool's path, bytes and hash on one line (and a read's content as text); anything else as
 * JSON. The event as recorded is one click away (`raw event`).
 */
const outputView = (e: EntryOf<"Call">, goalId: string): ReadonlyArray<Node | null> => {
  const o = e.output
  const name = `${goalId}-${e.endSeq ?? e.seq}`
  const took = duration(e.durationMs ?? 0)
  // A sub-goal's end, as the delegate call recorded it: which sub-goal, how it ended, its summary.
  if (e.tool === "delegate" && isObject(o) && typeof o["child"] === "string") {
    return [
      h("p", { class: "sub-goal-end" }, "sub-goal ", goalLink(o["child"]), ` ended ${String(o["reason"])} after ${String(o["iterations"])} iterations, ${String(o["tokens"])} tokens · ${took}`),
      labelled("summary", o["summary"], `${name}-summary`)
    ]
  }
  if (isObject(o) && "exit_code" in o && typeof o["stdout"] === "string") {
    // How it failed, as `rx inspect` says it (`View.commandFailure`).
    const failed = e.failed ?? null
    return [
      h("p", { class: failed === null ? "muted command" : "command failed" },
        failed ?? "exit 0", ` · ${took}`, typeof o["sandbox"] === "string" ? ` · sandbox ${o["sandbox"]}` : "",
        o["truncated"] === true ? " · output cut in the middle" : ""),
      labelled("stdout", o["stdout"], `${name}-stdout`),
      labelled("stderr", o["stderr"], `${name}-stderr`),
      o["stdout"] === "" && o["stderr"] === "" ? h("p", { class: "muted" }, "no output") : null
    ]
  }
  if (isObject(o) && typeof o["path"] === "string" && typeof o["sha256"] === "string") {
    const bytes = typeof o["bytes"] === "number" ? o["bytes"] : typeof o["size"] === "number" ? o["size"] : undefined
    const what = e.tool === "read_file" ? "read" : o["created"] === true ? "created" : "wrote"
    return [
      h("p", { class: "file" }, `${what} `, h("span", { class: "mono" }, o["path"]),
        bytes === undefined ? "" : ` · ${bytes.toLocaleString("en")} bytes`,
        " · sha256 ", h("span", { class: "mono", title: o["sha256"] }, o["sha256"].slice(0, 12)),
        ` · ${took}`),
      labelled("content", o["content"], `${name}-content`)
    ]
  }
  return [h("p", { class: "muted" }, `${e.tool} succeeded in ${took}`), block(o, `${name}-output`)]
}

/** The rows of one entry of a step: a call is two, its start (tool and input) and, once it has one, its outcome. */
const entryRows = (e: Entry, goalId: string, raw: Raw): ReadonlyArray<HTMLElement> => {
  switch (e._tag) {
    case "ModelResponded":
      return [row(raw, e.seq, "model", "model",
        ...(e.text.trim() === "" ? [] : [h("p", { class: "thought" }, e.text)]),
        ...e.calls.map((c, i) => h("p", { class: "decision" }, e.calls.length > 1 ? `[${i}] ` : "", h("b", {}, c.name), " ", preview(c.arguments, 200))),
        h("p", { class: "muted" }, `${e.usage.inputTokens} tokens in, ${e.usage.outputTokens} out${e.finishReason === "length" ? ", cut off" : ""}`))]
    case "ModelFailed":
      return [row(raw, e.seq, "model", "bad", h("p", {}, `failed: ${e.message}`))]
    case "ActionRejected":
      // An answer with no action: what the model said is what a person wants to read.
      return [e.kind === "no_action"
        ? row(raw, e.seq, "rejected", "bad", h("p", {}, `no action: ${e.reason}`), h("p", { class: "muted" }, "the model said:"), h("p", { class: "said" }, e.raw.trim() === "" ? "(nothing)" : e.raw))
        : row(raw, e.seq, "rejected", "bad", h("p", {}, `${e.index === undefined ? "" : `[${e.index}] `}${e.kind}: ${e.reason}`), block(e.raw, `${goalId}-${e.seq}-raw`))]
    case "Call": {
      const start = row(raw, e.seq, "tool", "tool", h("p", {}, h("b", {}, e.tool), ` call ${e.callId}`), block(e.input, `${goalId}-${e.seq}-input`))
      if (e.endSeq === undefined) return [start]
      const end = e.error === undefined
        ? row(raw, e.endSeq, "output", "ok", ...outputView(e, goalId))
        : row(raw, e.endSeq, "error", "bad",
          h("p", {}, e.durationMs === null || e.durationMs === undefined ? `${e.tool} was cut short: rx stopped during the call` : `${e.tool} failed (${e.error.kind}) in ${duration(e.durationMs)}`),
          block(e.error.message, `${goalId}-${e.endSeq}-error`))
      // An outcome whose start the log does not hold is drawn alone.
      return e.endSeq === e.seq ? [end] : [start, end]
    }
    case "ApprovalRequested":
      return [row(raw, e.seq, "approval", "wait", h("p", {}, h("b", {}, e.tool), ` call ${e.callId} waits for a person's approval`), block(e.input, `${goalId}-${e.seq}-input`))]
    case "ApprovalDecided":
      return [row(raw, e.seq, "decided", e.approved ? "ok" : "bad", h("p", {}, `${e.approved ? "approved" : `denied (${e.reason})`} by ${e.by}, call ${e.callId}`))]
    case "Suspended":
      return [row(raw, e.seq, "suspended", "wait", h("p", {}, `${e.reason}: ${e.detail}`), e.child === undefined ? null : h("p", {}, "waits on its sub-goal ", goalLink(e.child)))]
    case "CancelRequested":
      return [row(raw, e.seq, "cancel", "bad", h("p", {}, e.reason))]
    case "OptionsChanged":
      return [row(raw, e.seq, "options", "muted", h("p", {}, e.changes.length === 0 ? "the goal's options were set again, unchanged" : "the goal's options changed: "),
        ...e.changes.map((c) => h("p", { class: "mono" }, `${c.name} ${c.value === undefined ? "(unset)" : preview(c.value, 200)} (was ${c.was === undefined ? "unset" : preview(c.was, 200)})`)))]
    case "Terminated":
      return [row(raw, e.seq, "end", e.reason === "done" ? "ok" : "bad", h("p", {}, h("b", {}, e.reason), `: ${e.detail}`))]
    case "MessageSent":
      return [row(raw, e.seq, "message", "muted", h("p", {}, `from ${e.by}:`), h("p", { class: "said" }, e.text))]
    case "TurnsSummarised":
      return [e.failed === undefined
        ? row(raw, e.seq, "summary", "muted",
          h("p", {}, `steps ${e.from} to ${e.to} summarised${e.cut === true ? " (cut to fit)" : ""}: ${e.usage.inputTokens} tokens in, ${e.usage.outputTokens} out`),
          h("p", { class: "said" }, e.text))
        : row(raw, e.seq, "summary", "bad", h("p", {}, `no summary of steps ${e.from} to ${e.to} (${e.failed}): they are only counted`))]
    case "IterationCompleted":
      return []
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

/** A step's card: its entries (`View.steps`, and any summary made at it), and where its time went. */
const stepCard = (iteration: number, entries: ReadonlyArray<Entry>, events: ReadonlyArray<Event>, start: number, goalId: string, raw: Raw) => {
  const t = timing(events, start)
  return h("section", { class: "step", id: `step-${iteration}` },
    h("h3", {}, `Step ${iteration}`, h("span", { class: "muted" }, ` model ${duration(t.model)}, tools ${duration(t.tools)}`)),
    // Each row names the entry it draws (`data-entry`), as `rx inspect --json` names it.
    ...entries.flatMap((e) => entryRows(e, goalId, raw).map((row) => {
      row.dataset["entry"] = e._tag
      return row
    })))
}

/** The calls that ended, each with its step, outcome (a command's exit when it did not exit 0), duration and input. */
const trace = (view: ReadonlyArray<Step>) => {
  const done = view.flatMap((s) => s.entries.flatMap((e) => (e._tag === "Call" && e.endSeq !== undefined ? [{ step: s.step, end: e.endSeq, call: e }] : [])))
  return h("table", { class: "trace" },
    h("thead", {}, h("tr", {}, ...["step", "tool", "result", "duration", "input"].map((c) => h("th", {}, c)))),
    h("tbody", {}, ...done.map(({ call, end, step }) =>
      h("tr", { class: call.error === undefined ? "" : "bad" },
        h("td", { class: "num" }, h("a", { href: `#seq-${end}`, on: { click: (ev) => jump(ev, end) } }, step)),
        h("td", {}, call.tool),
        h("td", {}, call.failed ?? call.outcome),
        h("td", { class: "num" }, call.durationMs === null || call.durationMs === undefined ? "cut short" : duration(call.durationMs)),
        h("td", { class: "mono" }, preview(call.input, 80))))))
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

/** Who acts: asked once per tab, kept in it, recorded with what they do. */
const whoInput = (id: string) =>
  h("input", { id, attrs: { type: "text", placeholder: "your name", "aria-label": "your name", maxlength: "80", value: Api.name() ?? "" } })

/** The name given, kept for the tab; or undefined, with the field focused and why said in `status`. */
const whoOf = (name: HTMLInputElement, status: HTMLElement, what: string): string | undefined => {
  const by = name.value.trim()
  if (by === "") {
    name.focus()
    fill(status, `Your name first: it is recorded with ${what}.`)
    return undefined
  }
  Api.rememberName(by)
  return by
}

/**
 * A message to a goal that has not ended (`rx say`): recorded at once, read by the model at its
 * next request, never interrupting a call. Built once per page, so what is typed survives refreshes.
 */
const messagePanel = (goalId: string) => {
  const text = h("textarea", { id: "message-text", attrs: { rows: "2", maxlength: "8000", placeholder: "e.g. use the blue folder; leave the tests alone", "aria-label": "message" } })
  const name = whoInput("sender-name")
  const status = h("span", { class: "muted", id: "message-status" })
  const key = Api.idempotencyKey(text)
  const send = async () => {
    if (text.value.trim() === "") return fill(status, "The message needs a text.")
    const by = whoOf(name, status, "the message")
    if (by === undefined) return
    fill(status, "sending…")
    try {
      await Api.say(goalId, text.value, by, key.current())
      text.value = ""
      key.renew()
      fill(status, "Sent: the goal reads it at its next model request.")
    } catch (error) {
      fill(status, `Not sent: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  return h("section", { class: "message", id: "message-panel" },
    h("h2", {}, "Tell this goal"),
    text,
    h("div", { class: "actions" }, h("label", { class: "who" }, "Sending as ", name), h("button", { id: "send-message", on: { click: () => void send() } }, "Send"), status))
}

/**
 * A goal that ended, continued as a new goal (`rx run --continue`): it starts from what this one
 * did, with the text as its new instruction; the page then shows the new goal.
 */
const continuePanel = (goalId: string) => {
  const text = h("input", { id: "continue-text", attrs: { type: "text", placeholder: "continue", "aria-label": "the new instruction" } })
  const status = h("span", { class: "muted" })
  const key = Api.idempotencyKey(text)
  const go = async () => {
    fill(status, "submitting…")
    try {
      const { goalId: next } = await Api.submit({ goal: text.value.trim() === "" ? "continue" : text.value, continues: goalId }, key.current())
      location.hash = `#/goals/${encodeURIComponent(next)}`
    } catch (error) {
      fill(status, `Not continued: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  return h("section", { class: "message", id: "continue-panel" },
    h("h2", {}, "Continue as a new goal"),
    h("p", { class: "muted" }, "A new goal starts from what this one did (its text, how it ended, its summaries and last steps); this goal's log stays as it is."),
    h("div", { class: "actions" }, text, h("button", { id: "continue", on: { click: () => void go() } }, "Continue"), status))
}

/** The call waiting for a decision, exactly as it will run, with approve and deny. */
const approvalPanel = (model: Model, refresh: () => void) => {
  const approval = model.goal?.approval
  if (model.goal?.status !== "waiting" || approval === null || approval === undefined) return null
  const reason = h("input", { attrs: { type: "text", placeholder: "why (told to the model when denied)", "aria-label": "reason" } })
  const status = h("span", { class: "muted" })
  const name = whoInput("approver-name")
  const act = (approve: boolean) => async () => {
    const by = whoOf(name, status, "the decision")
    if (by === undefined) return
    fill(status, approve ? "approving…" : "denying…")
    try {
      await Api.decide(model.goalId, approval.callId, approve, approve ? undefined : reason.value, by)
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
      h("label", { class: "who" }, "Deciding as ", name),
      h("button", { class: "primary", id: "approve", on: { click: act(true) } }, "Approve"),
      reason,
      h("button", { id: "deny", on: { click: act(false) } }, "Deny"),
      status))
}

/** An open goal nothing runs: said plainly, with Resume (the server checks it as the API does, and its answer is shown). */
const resumePanel = (model: Model, refresh: () => void) => {
  const g = model.goal
  if (g === undefined || g.status !== "open" || g.activity !== "idle") return null
  // Waiting on a sub-goal's call that asks for approval: resuming would only wait again, so the way to that call is offered.
  const asking = g.suspended?.reason === "awaiting_approval" ? g.suspended.child : undefined
  const below = model.children.find((c) => c.goalId === asking)
  if (asking !== undefined && (below === undefined || below.status === "waiting" || below.suspended?.reason === "awaiting_approval")) {
    return h("section", { class: "idle", id: "resume-panel" },
      h("p", {}, h("b", {}, "Waits for a decision in its sub-goal"), ": ", goalLink(asking), " has a call waiting for approval. Decide it there; this goal then goes on by itself."),
      h("div", { class: "actions" }, h("a", { class: "primary", id: "to-approval", href: `#/goals/${encodeURIComponent(asking)}` }, "Go to the approval")))
  }
  const status = h("span", { class: "muted" })
  const resume = async () => {
    fill(status, "resuming…")
    try {
      await Api.resume(model.goalId)
      fill(status, "resumed")
      refresh()
    } catch (error) {
      fill(status, `Not resumed: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  return h("section", { class: "idle", id: "resume-panel" },
    h("p", {}, h("b", {}, "Nothing runs this goal now"),
      g.suspended === null ? ": its runner stopped before it ended." : `: suspended (${g.suspended.reason}): ${g.suspended.detail}`),
    h("div", { class: "actions" }, h("button", { class: "primary", id: "resume", on: { click: () => void resume() } }, "Resume"), status))
}

/** A table of related goals (sub-goals, forks): each linked, with its status, text and iterations, and any extra columns. */
const goalsTable = (id: string, rowId: string, first: string, goals: ReadonlyArray<Goal>, extra: ReadonlyArray<readonly [string, (g: Goal) => string | number]> = []) =>
  h("table", { class: "goals children", id },
    h("thead", {}, h("tr", {}, ...[first, ...extra.map(([name]) => name), "status", "text", "iterations"].map((c) => h("th", {}, c)))),
    h("tbody", {}, ...goals.map((g) =>
      h("tr", { id: `${rowId}-${g.goalId}` },
        h("td", {}, goalLink(g.goalId)),
        ...extra.map(([, value]) => h("td", { class: "num" }, value(g))),
        h("td", {}, badge(g)),
        h("td", { title: preview(g.goal, 1_000) }, preview(g.goal, 100)),
        h("td", { class: "num" }, g.iterations)))))

/**
 * Where the goal is in its tree: the goal that delegated it, the goal it was forked from or
 * continues, what it waits on, and its sub-goals and forks with their status.
 */
const treeView = (model: Model) => {
  const submitted = model.events[0]
  const parent = submitted?._tag === "GoalSubmitted" ? submitted.parent : undefined
  const forkedFrom = submitted?._tag === "GoalSubmitted" ? submitted.forkedFrom : undefined
  const continues = submitted?._tag === "GoalSubmitted" ? submitted.continues : undefined
  const waitsOn = model.goal?.status === "terminated" ? undefined : model.goal?.suspended?.child
  if (parent === undefined && forkedFrom === undefined && continues === undefined && waitsOn === undefined && model.children.length === 0 && model.forks.length === 0) return null
  return h("section", { class: "tree", id: "tree" },
    parent === undefined ? null : h("p", { id: "parent" }, "Sub-goal of ", goalLink(parent.goalId), ` (its call ${parent.callId}, depth ${parent.depth})`),
    forkedFrom === undefined ? null : h("p", { id: "forked-from" }, "Forked from ", goalLink(forkedFrom.goalId), ` at step ${forkedFrom.iteration}: its steps 1 to ${forkedFrom.iteration} are copied here, not run again. It went on with the workspace's files as they were when it started, not as they were at step ${forkedFrom.iteration}.`),
    continues === undefined ? null : h("p", { id: "continues" }, "Continues ", goalLink(continues.goalId), ` (it ended ${continues.reason}), told: `, h("q", {}, preview(continues.text, 300))),
    waitsOn === undefined ? null : h("p", { class: "wait", id: "waits-on" }, "Waits on its sub-goal ", goalLink(waitsOn), `: ${model.goal?.suspended?.detail ?? ""}`),
    model.children.length === 0 ? null : goalsTable("children", "child", "sub-goal", model.children),
    model.forks.length === 0 ? null : goalsTable("forks", "fork", "fork", model.forks, [["at step", (g) => g.forkedFrom?.iteration ?? "?"]]))
}

export const show = (root: HTMLElement, goalId: string, signal: AbortSignal) => {
  const model: Model = { goalId, events: [], lines: [], goal: undefined, children: [], forks: [] }
  const head = h("div", { class: "head" })
  const treeBox = h("div", {})
  const approval = h("div", {})
  /** The call whose approval panel is shown, if one is. */
  let approvalShown: string | undefined
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
  const tell = messagePanel(goalId)
  const onward = continuePanel(goalId)
  tell.hidden = true
  onward.hidden = true
  fill(root,
    h("p", {}, h("a", { href: "#/" }, "← goals")),
    head, treeBox, problem, approval, tell, onward,
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
    const settings = submitted?._tag === "GoalSubmitted" ? submitted.options.settings ?? {} : {}
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
        g === undefined ? "" : `${g.iterations} iteration${g.iterations === 1 ? "" : "s"}, submitted ${age(g.submittedAt)}`,
        settings.model === undefined ? "" : `, model ${settings.model}`,
        settings.workspace === undefined ? "" : `, in ${settings.workspace}`,
        " ", cancel))
    // The panel of a call that still waits is kept as it is: a redraw (each event the page
    // catches up on refreshes the goal) must not drop a reason being typed, nor the button clicked.
    const waiting = g?.status === "waiting" ? g.approval?.callId : undefined
    if (waiting === undefined || waiting !== approvalShown) {
      approvalShown = waiting
      fill(approval, approvalPanel(model, () => void refresh()), resumePanel(model, () => void refresh()))
    }
    tell.hidden = g === undefined || g.status === "terminated"
    onward.hidden = g?.status !== "terminated"
    fill(treeBox, treeView(model))
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
    // The steps as `rx inspect` shows them: the events followed are the log's own encoding, which is the kernel's `Event`.
    const view = stepsOf(model.events as unknown as Parameters<typeof stepsOf>[0])
    const raw: Raw = new Map(model.events.map((e) => [e.seq, e]))
    for (const i of dirty) {
      if (i === 0) continue
      const entries = view.filter((s) => s.step === i).flatMap((s) => s.entries)
      const card = stepCard(i, entries, by.get(i) ?? [], start.get(i) ?? 0, goalId, raw)
      const old = cards.get(i)
      if (old === undefined) steps.appendChild(card)
      else old.replaceWith(card)
      cards.set(i, card)
    }
    dirty.clear()
    fill(traceBox, trace(view))
    fill(timelineBox, timeline(model.events))
    drawRaw()
    drawHead()
  }

  const refresh = async () => {
    try {
      const [goal, children, forks] = await Promise.all([Api.goal(goalId), Api.children(goalId), Api.forks(goalId)])
      model.goal = goal
      model.children = [...children.goals].reverse()
      model.forks = [...forks.goals].reverse()
      fill(problem)
    } catch (error) {
      // A server that does not answer is said at the top of the page.
      if (!Api.unreachable(error)) fill(problem, error instanceof Error ? error.message : String(error))
    }
    drawHead()
  }

  void refresh()
  // Back after the server was gone: what the goal is now (the events follow by themselves).
  const unwatch = Api.watchConnection((now) => {
    if (signal.aborted) return unwatch()
    if (now.state === "up") void refresh()
  })
  Api.follow(goalId, (event, line) => {
    model.events.push(event)
    model.lines.push(line)
    dirty.add(event.iteration)
    // The header follows what changes a goal's status.
    if (["ApprovalRequested", "ApprovalDecided", "Suspended", "CancelRequested", "Terminated", "IterationCompleted", "ToolStarted", "GoalSubmitted"].includes(event._tag)) void refresh()
    if (!scheduled) {
      scheduled = true
      requestAnimationFrame(draw)
    }
  }, signal).catch((error: unknown) => {
    if (!signal.aborted) fill(problem, `The events stopped: ${error instanceof Error ? error.message : String(error)}`)
  })
}

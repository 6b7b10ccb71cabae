/**
 * The rx API from the page: same origin, the bearer token in a header (never in a URL), kept in
 * this tab's sessionStorage, and handed to a new tab of the page by an open one. A 401 forgets
 * the token and asks for it again.
 */
import type { Event, Goal, GoalPage } from "./types.js"

const key = "rx.token"

export const token = (): string | null => sessionStorage.getItem(key)
export const remember = (value: string) => sessionStorage.setItem(key, value)
export const forget = () => sessionStorage.removeItem(key)

/**
 * Tabs of this page hand the token to a new one: a tab without it asks on a BroadcastChannel,
 * which reaches only this origin's pages in this browser profile (never a URL, a Referer, a
 * cookie or a log), and a tab that has it answers. The new tab checks it with the server before
 * keeping it in its own sessionStorage.
 */
const channelName = "rx.token"
const channelOf = (): BroadcastChannel | undefined => (typeof BroadcastChannel === "undefined" ? undefined : new BroadcastChannel(channelName))

/** Answer other tabs' asks with this tab's token, while it has one. */
export const shareWithNewTabs = () => {
  const channel = channelOf()
  if (channel === undefined) return
  channel.onmessage = (event: MessageEvent<unknown>) => {
    const data = event.data
    const current = token()
    if (typeof data === "object" && data !== null && "ask" in data && current !== null) channel.postMessage({ token: current })
  }
}

/** The token an open tab of this page has, if one answers within `waitMs`. */
export const fromOpenTab = (waitMs: number): Promise<string | null> =>
  new Promise((resolve) => {
    const channel = channelOf()
    if (channel === undefined) return resolve(null)
    const done = (value: string | null) => {
      clearTimeout(timer)
      channel.close()
      resolve(value)
    }
    const timer = setTimeout(() => done(null), waitMs)
    channel.onmessage = (event: MessageEvent<unknown>) => {
      const data = event.data
      if (typeof data === "object" && data !== null && "token" in data && typeof data.token === "string") done(data.token)
    }
    channel.postMessage({ ask: true })
  })

/** An error of the API, with its body's message. */
export class ApiError extends Error {
  constructor(readonly status: number, message: string, readonly tag: string | undefined) {
    super(message)
  }
}

/** Called when the server refuses the token this tab kept. */
let onUnauthorized = () => {}
export const whenUnauthorized = (handler: () => void) => {
  onUnauthorized = handler
}

/** Whether the server answers: `down` since when, and why, until it answers again. */
export type Connection = { readonly state: "up" } | { readonly state: "down"; readonly since: number; readonly why: string }
let connection: Connection = { state: "up" }
const watchers = new Set<(now: Connection) => void>()
/** Called with the connection's state each time it changes. */
export const watchConnection = (watcher: (now: Connection) => void) => {
  watchers.add(watcher)
  return () => void watchers.delete(watcher)
}
const setConnection = (next: Connection) => {
  if (next.state === connection.state) return
  connection = next
  for (const watcher of watchers) watcher(next)
}
export const connectionNow = () => connection
const down = (why: string) => setConnection({ state: "down", since: Date.now(), why })
const up = () => setConnection({ state: "up" })

/** Whether an error means the server did not answer (not that it refused). */
export const unreachable = (error: unknown) => error instanceof ApiError && (error.status === 0 || error.status === 502 || error.status === 503 || error.status === 504)

/**
 * How long an answer may take (a stream of events excepted) before the server counts as not
 * answering: a hung server, or a network that drops packets, never says so by itself.
 */
const answerMs = 20_000
/** How long `/healthz` may take. */
const pingMs = 5_000

const notAnswering = () => {
  down("it does not answer")
  return new ApiError(0, "the server does not answer", undefined)
}

/** Aborted with `signal`, or once `ms` have passed (`undefined`: never). */
const within = (ms: number | undefined, signal?: AbortSignal | null): AbortSignal | null => {
  const signals = [...(ms === undefined ? [] : [AbortSignal.timeout(ms)]), ...(signal === undefined || signal === null ? [] : [signal])]
  return signals.length === 0 ? null : AbortSignal.any(signals)
}

const call = async (path: string, init: RequestInit = {}, given?: string, ms: number | undefined = answerMs): Promise<Response> => {
  let response: Response
  try {
    response = await fetch(path, {
      ...init,
      signal: within(ms, init.signal),
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer",
      headers: { authorization: `Bearer ${given ?? token() ?? ""}`, ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers }
    })
  } catch (error) {
    if (init.signal?.aborted === true) throw error
    throw notAnswering()
  }
  if (response.ok) {
    up()
    return response
  }
  const body = (await response.json().catch(() => ({}))) as { _tag?: string; message?: string }
  if (response.status === 503) down(body.message ?? "it is unavailable")
  else up()
  if (response.status === 401 && given === undefined) {
    forget()
    onUnauthorized()
  }
  throw new ApiError(response.status, body.message ?? `${response.status} ${response.statusText}`, body._tag)
}

/** Ask the server whether it is there (`/healthz`, no token): keeps the connection's state current while nothing else calls. */
export const ping = async (): Promise<void> => {
  try {
    const response = await fetch("/healthz", { cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer", signal: within(pingMs) })
    if (response.ok) return up()
    const body = (await response.json().catch(() => ({}))) as { message?: string }
    down(body.message ?? `it answers ${response.status}`)
  } catch {
    down("it does not answer")
  }
}

const nameKey = "rx.name"
/** The name this tab decides approvals as (asked once, kept in the tab), or null. */
export const name = (): string | null => sessionStorage.getItem(nameKey)
export const rememberName = (value: string) => sessionStorage.setItem(nameKey, value)

const json = async <A>(path: string, init: RequestInit = {}): Promise<A> => {
  const response = await call(path, init)
  try {
    return (await response.json()) as A
  } catch (error) {
    // The body stopped coming (the answer's time is up, or the connection dropped); a body that
    // is not JSON is the server's fault, said as it is.
    if (init.signal?.aborted === true || error instanceof SyntaxError) throw error
    throw notAnswering()
  }
}

/** Whether `candidate` is the server's token. */
export const check = async (candidate: string): Promise<boolean> => {
  try {
    await call("/v1/goals?limit=1", {}, candidate)
    return true
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return false
    throw error
  }
}

export const list = (status: string, cursor?: string) =>
  json<GoalPage>(`/v1/goals?limit=100${status === "" ? "" : `&status=${encodeURIComponent(status)}`}${cursor === undefined ? "" : `&cursor=${encodeURIComponent(cursor)}`}`)

/** The sub-goals a goal delegated (the newest 100). */
export const children = (goalId: string) => json<GoalPage>(`/v1/goals?limit=100&parent=${encodeURIComponent(goalId)}`)
export const forks = (goalId: string) => json<GoalPage>(`/v1/goals?limit=100&forkedFrom=${encodeURIComponent(goalId)}`)

const goalPath = (goalId: string) => `/v1/goals/${encodeURIComponent(goalId)}`

export const goal = (goalId: string) => json<Goal>(goalPath(goalId))
export const cancel = (goalId: string) => json<Goal>(`${goalPath(goalId)}/cancel`, { method: "POST" })
export const decide = (goalId: string, callId: string, approve: boolean, reason?: string, by?: string) =>
  json<Goal>(`${goalPath(goalId)}/approvals/${encodeURIComponent(callId)}`, {
    method: "POST",
    body: JSON.stringify({ approve, ...(reason === undefined || reason.trim() === "" ? {} : { reason }), ...(by === undefined ? {} : { by }) })
  })
export const resume = (goalId: string) => json<Goal>(`${goalPath(goalId)}/resume`, { method: "POST" })

/** What the page submits: the API's `SubmitRequest`. */
export interface Submission {
  readonly goal: string
  readonly workspace?: string
  readonly instructions?: string
  readonly options?: { readonly approval: Readonly<Record<string, "auto" | "ask" | "deny">> }
  /** An ended goal this one continues (`goal` is then the new instruction). */
  readonly continues?: string
}
/**
 * The Idempotency-Key of what a form holds: the same until the form changes (a retry of the same
 * text is the same request), a new one after any input to `form`, or when `renew`ed after a send.
 */
export const idempotencyKey = (form: HTMLElement) => {
  let key = crypto.randomUUID()
  const renew = () => {
    key = crypto.randomUUID()
  }
  form.addEventListener("input", renew)
  form.addEventListener("change", renew)
  return { current: () => key, renew }
}

/** Submit a goal; `key` makes a retry of the same form safe (the API's Idempotency-Key). */
export const submit = (body: Submission, key: string) =>
  json<{ readonly goalId: string }>("/v1/goals", { method: "POST", body: JSON.stringify(body), headers: { "idempotency-key": key } })

/** Tell a goal something: the model reads it at its next request; `key` makes a retry one message. */
export const say = (goalId: string, text: string, by: string, key: string) =>
  json<Goal>(`${goalPath(goalId)}/messages`, { method: "POST", body: JSON.stringify({ text, by }), headers: { "idempotency-key": key } })

/**
 * Follow a goal's events (JSON lines) from after `after`, calling `onEvent` with each event and
 * its line as received, until `Terminated` or `signal` aborts. A dropped connection is resumed
 * after the last event seen.
 */
export const follow = async (
  goalId: string,
  onEvent: (event: Event, line: string) => void,
  signal: AbortSignal,
  after = -1
): Promise<void> => {
  let last = after
  let empties = 0
  let waitMs = 500
  /** A server gone (or stopping): wait, longer each time up to 5 s, and follow again after the last event seen. */
  const later = async () => {
    await new Promise((resolve) => setTimeout(resolve, waitMs))
    waitMs = Math.min(5_000, waitMs * 2)
  }
  while (!signal.aborted) {
    let response: Response
    try {
      response = await call(`${goalPath(goalId)}/events${last < 0 ? "" : `?from=${last}`}`, { signal }, undefined, undefined)
    } catch (error) {
      if (signal.aborted || !unreachable(error)) throw error
      // Streams ended by a server going away are not the server misbehaving.
      empties = 0
      await later()
      continue
    }
    waitMs = 500
    const reader = response.body?.pipeThrough(new TextDecoderStream()).getReader()
    if (reader === undefined) return
    let buffer = ""
    let seen = 0
    for (;;) {
      let chunk: ReadableStreamReadResult<string>
      try {
        chunk = await reader.read()
      } catch (error) {
        // The connection dropped mid-stream (the server stopped): follow again from the last event.
        if (signal.aborted) throw error
        down("it does not answer")
        break
      }
      const { done, value } = chunk
      if (done) break
      buffer += value
      let newline = buffer.indexOf("\n")
      while (newline >= 0) {
        const line = buffer.slice(0, newline)
        buffer = buffer.slice(newline + 1)
        newline = buffer.indexOf("\n")
        if (line.trim() === "") continue
        const event = JSON.parse(line) as Event
        last = event.seq
        seen++
        onEvent(event, line)
        if (event._tag === "Terminated") return
      }
    }
    empties = seen === 0 ? empties + 1 : 0
    if (empties >= 3) throw new ApiError(0, "the server keeps ending the events before the goal ends", undefined)
    await new Promise((resolve) => setTimeout(resolve, seen === 0 ? 1_000 : 0))
  }
}

/**
 * Elements built from text only. Nothing that came from a model, a tool or a goal is ever parsed
 * as HTML: it is set as a text node, with control and direction-changing characters made visible.
 */
export type Child = Node | string | number | null | undefined | false

export interface Props {
  readonly class?: string
  readonly title?: string
  /** Only for links this page makes itself (`#/goals/...`). */
  readonly href?: string
  readonly id?: string
  readonly attrs?: Readonly<Record<string, string>>
  readonly on?: { readonly [K in keyof HTMLElementEventMap]?: (event: HTMLElementEventMap[K]) => void }
}

/** Control characters (but tab and newline) and bidirectional overrides, which could disguise text. */
const hidden = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g

/** Text as shown: every invisible or reordering character as a visible `\u{...}`. */
export const visible = (text: string): string =>
  text.replace(hidden, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`)

export const h = <K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: ReadonlyArray<Child>): HTMLElementTagNameMap[K] => {
  const element = document.createElement(tag)
  if (props.class !== undefined) element.className = props.class
  if (props.title !== undefined) element.title = visible(props.title)
  if (props.id !== undefined) element.id = props.id
  if (props.href !== undefined) element.setAttribute("href", props.href)
  for (const [name, value] of Object.entries(props.attrs ?? {})) element.setAttribute(name, value)
  for (const [name, listener] of Object.entries(props.on ?? {})) element.addEventListener(name, listener as EventListener)
  append(element, children)
  return element
}

export const append = (parent: Node, children: ReadonlyArray<Child>) => {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    parent.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(visible(String(child))) : child)
  }
}

/** Replace an element's children. */
export const fill = (parent: Element, ...children: ReadonlyArray<Child>) => {
  parent.replaceChildren()
  append(parent, children)
}

/** A value as one JSON text (strings as they are), computed once per value. */
const texts = new WeakMap<object, string>()
export const asText = (value: unknown): string => {
  if (typeof value === "string") return value
  if (typeof value !== "object" || value === null) return String(JSON.stringify(value))
  const known = texts.get(value)
  if (known !== undefined) return known
  const text = JSON.stringify(value, null, 2) ?? "null"
  texts.set(value, text)
  return text
}

/** A one-line preview of a value, at most `max` characters. */
export const preview = (value: unknown, max = 120): string => {
  const text = typeof value === "string" ? value : typeof value === "object" && value !== null ? JSON.stringify(value) ?? "" : String(value)
  const line = text.length > max * 4 ? text.slice(0, max * 4) : text
  const flat = line.replace(/\s+/g, " ")
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

/** Text beyond this many characters is folded; beyond `shownMax` it is only downloadable. */
const foldAt = 2_000
const shownMax = 100_000

/** Save text as a file (a Blob URL, revoked at once). */
export const download = (name: string, text: string, type = "text/plain") => {
  const url = URL.createObjectURL(new Blob([text], { type }))
  const link = h("a", { href: url, attrs: { download: name } })
  document.body.appendChild(link)
  link.click()
  link.remove()
  URL.revokeObjectURL(url)
}

/**
 * A value in a `<pre>`: short ones whole; long ones folded (the start shown, the rest on demand,
 * at most `shownMax` characters in the page, the whole as a download), so a 5 MB output never
 * lands in the DOM.
 */
export const block = (value: unknown, name: string, cls = "value"): HTMLElement => {
  const text = asText(value)
  if (text.length <= foldAt) return h("pre", { class: cls }, text)
  // Says exactly how much is hidden: a person deciding on a call must know what they have not seen.
  const hidden = (text.length - foldAt).toLocaleString("en")
  const body = h("pre", { class: cls }, `${text.slice(0, foldAt)}\n[… ${hidden} more characters not shown here]`)
  const more = h("details", { class: "fold" }, h("summary", {}, `show all ${text.length.toLocaleString("en")} characters (${hidden} more)`))
  more.addEventListener("toggle", () => {
    if (!more.open || more.dataset["shown"] === "1") return
    more.dataset["shown"] = "1"
    append(more, [
      h("pre", { class: cls }, text.length > shownMax ? `${text.slice(0, shownMax)}…` : text),
      text.length > shownMax ? h("p", { class: "muted" }, `the first ${shownMax.toLocaleString("en")} characters; download for the rest`) : null
    ])
  })
  return h("div", {}, body, more, h("button", { class: "link", on: { click: () => download(`${name}.txt`, text) } }, "download"))
}

/** Milliseconds as a short duration. */
export const duration = (ms: number): string =>
  ms < 1_000 ? `${Math.round(ms)} ms` : ms < 60_000 ? `${(ms / 1_000).toFixed(1)} s` : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1_000)} s`

/** How long ago an epoch-millisecond time was. */
export const age = (at: number, now = Date.now()): string => {
  const s = Math.max(0, Math.round((now - at) / 1_000))
  if (s < 60) return `${s} s ago`
  if (s < 3_600) return `${Math.floor(s / 60)} min ago`
  if (s < 86_400) return `${Math.floor(s / 3_600)} h ago`
  return `${Math.floor(s / 86_400)} d ago`
}

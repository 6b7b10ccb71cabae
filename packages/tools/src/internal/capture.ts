/** Bounded capture of a stream: the first and the last bytes are kept, the middle is counted. */

export class HeadTail {
  private readonly head: Array<Buffer> = []
  private headBytes = 0
  private tail: Array<Buffer> = []
  private tailBytes = 0
  /** Bytes seen in all. */
  total = 0

  constructor(private readonly headMax: number, private readonly tailMax: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length
    let rest = chunk
    if (this.headBytes < this.headMax) {
      const take = Math.min(this.headMax - this.headBytes, rest.length)
      this.head.push(rest.subarray(0, take))
      this.headBytes += take
      rest = rest.subarray(take)
    }
    if (rest.length === 0 || this.tailMax === 0) return
    // Copy: a kept slice must not pin the whole chunk it came from.
    this.tail.push(Buffer.from(rest.subarray(Math.max(0, rest.length - this.tailMax))))
    this.tailBytes += Math.min(rest.length, this.tailMax)
    while (this.tailBytes - (this.tail[0]?.length ?? 0) >= this.tailMax) {
      this.tailBytes -= this.tail[0]?.length ?? 0
      this.tail.shift()
    }
  }

  /** The kept bytes, and how many were dropped between head and tail. */
  result(): { readonly head: Buffer; readonly tail: Buffer; readonly dropped: number } {
    const tail = Buffer.concat(this.tail)
    const keptTail = tail.subarray(Math.max(0, tail.length - this.tailMax))
    const head = Buffer.concat(this.head)
    return { head, tail: keptTail, dropped: this.total - head.length - keptTail.length }
  }
}

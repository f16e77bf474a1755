/** A body gathered as it streams, kept only while it fits in `limit` bytes. */
export class BoundedBody {
  private readonly chunks: Buffer[] = []
  private size = 0
  private readonly limit: number

  constructor(limit: number) {
    this.limit = limit
  }

  add(chunk: Buffer): void {
    this.size += chunk.length
    if (this.size <= this.limit) this.chunks.push(chunk)
  }

  /** Whether the body went past the limit: nothing more of it is kept. */
  get over(): boolean {
    return this.size > this.limit
  }

  /**
   * The whole body, or `undefined` once it went past the limit. A body that
   * came in one chunk (most answers) is that chunk, not a copy: whoever keeps
   * it for long copies it anyway (the memory store of retry protection keeps
   * it as a string), so copying here as well would copy it twice.
   */
  bytes(): Buffer | undefined {
    if (this.size > this.limit) return undefined
    return this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.size)
  }
}

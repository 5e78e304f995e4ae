/** A bounded wait queue that serves keys round-robin, so one busy key cannot starve the others. */
export class FairQueue<T> {
  private readonly byKey = new Map<string, T[]>();
  /** Keys with waiters, in the order they will next be served. */
  private readonly rotation: string[] = [];
  private count = 0;

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.count;
  }

  get full(): boolean {
    return this.count >= this.capacity;
  }

  push(key: string, item: T): void {
    let list = this.byKey.get(key);
    if (!list) {
      list = [];
      this.byKey.set(key, list);
      this.rotation.push(key);
    }
    list.push(item);
    this.count++;
  }

  /** Takes the oldest waiter of the key whose turn it is. */
  shift(): T | undefined {
    const key = this.rotation.shift();
    if (key === undefined) return undefined;
    const list = this.byKey.get(key)!;
    const item = list.shift()!;
    this.count--;
    if (list.length > 0) this.rotation.push(key);
    else this.byKey.delete(key);
    return item;
  }

  remove(key: string, item: T): boolean {
    const list = this.byKey.get(key);
    const at = list ? list.indexOf(item) : -1;
    if (!list || at < 0) return false;
    list.splice(at, 1);
    this.count--;
    if (list.length === 0) {
      this.byKey.delete(key);
      this.rotation.splice(this.rotation.indexOf(key), 1);
    }
    return true;
  }
}

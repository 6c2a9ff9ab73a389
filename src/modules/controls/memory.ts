import type { Queryable } from "../../db/database.ts";
import { limits } from "../../limits.ts";
import { BoundedMap } from "../shared/bounded-map.ts";
import { type CardTargets, controlOf, controlsOfCard, controlsOnTargets, targetsOf } from "./repository.ts";
import type { Control } from "./rules.ts";

/**
 * The spending controls a process decides authorizations on, by target, as of one generation
 * (migration 0027): a batch written on them requires the generation unchanged, so a control
 * changed by any process makes the next batch refuse itself, and this memory starts again.
 */
export class ControlMemory {
  #generation: bigint | undefined;
  readonly #byTarget = new BoundedMap<string, Control[]>(limits.spendingControlTargetMemory);

  get generation(): bigint {
    return this.#generation ?? -1n;
  }

  /** Forgets every control: the next batch reads what it needs again. */
  forget(): void {
    this.#generation = undefined;
    this.#byTarget.clear();
  }

  /** The controls that apply to each card, read for the targets this memory does not hold. */
  async controlsFor(db: Queryable, cards: readonly CardTargets[]): Promise<Map<string, Control[]>> {
    const targets = new Set(cards.flatMap(targetsOf));
    const missing = [...targets].filter((target) => !this.#byTarget.has(target));
    if (missing.length > 0) {
      let read = await controlsOnTargets(db, missing);
      let readFor = missing;
      // Another generation: what is held is of an older one, so every target is read again.
      if (read.generation !== this.#generation && missing.length < targets.size) {
        readFor = [...targets];
        read = await controlsOnTargets(db, readFor);
      }
      if (read.generation !== this.#generation) this.#byTarget.clear();
      this.#generation = read.generation;
      this.#keep(readFor, read.rows.map(controlOf));
    }
    const byCard = new Map<string, Control[]>();
    for (const card of cards) {
      const controls = targetsOf(card).flatMap((target) => this.#byTarget.get(target) ?? []);
      byCard.set(card.id, controls.length === 0 ? [] : controlsOfCard(card, controls));
    }
    return byCard;
  }

  #keep(targets: string[], controls: Control[]): void {
    const byTarget = new Map<string, Control[]>(targets.map((target) => [target, []]));
    for (const control of controls) byTarget.get(control.targetId)?.push(control);
    for (const [target, list] of byTarget) this.#byTarget.set(target, list);
  }
}

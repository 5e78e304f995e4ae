export function distIsFresh(root: string): boolean;
export function buildDist(root: string): void;

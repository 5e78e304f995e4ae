// The 64 sentences every embeddings bench side embeds.
export const benchSentences = Array.from(
  { length: 64 },
  (_, i) => `The ${["cat", "dog", "girl", "boy"][i % 4]} number ${i} played in the ${["park", "garden", "house"][i % 3]} all day.`,
);

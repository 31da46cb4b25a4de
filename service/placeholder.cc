namespace emb {}

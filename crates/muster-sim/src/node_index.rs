//! A max-free segment tree over nodes: finds the nodes where a request fits without scanning
//! the ones where it cannot (a full 10k-node cluster answers "nowhere" at the root).

#[derive(Debug, Clone)]
pub struct NodeIndex {
    nodes: usize,
    size: usize,
    res: usize,
    /// `max[v * res + r]`: largest free amount of resource r on any node under tree vertex v.
    max: Vec<u64>,
}

impl NodeIndex {
    pub fn new(free: &[Vec<u64>], res: usize) -> Self {
        let nodes = free.len();
        let size = nodes.next_power_of_two().max(1);
        let mut ix = NodeIndex { nodes, size, res, max: vec![0; 2 * size * res] };
        for (i, f) in free.iter().enumerate() {
            ix.max[(size + i) * res..(size + i + 1) * res].copy_from_slice(f);
        }
        for v in (1..size).rev() {
            ix.pull(v);
        }
        ix
    }

    fn pull(&mut self, v: usize) {
        let r = self.res;
        for k in 0..r {
            self.max[v * r + k] = self.max[2 * v * r + k].max(self.max[(2 * v + 1) * r + k]);
        }
    }

    /// Records node `i`'s new free vector.
    pub fn update(&mut self, i: usize, free: &[u64]) {
        let r = self.res;
        let mut v = self.size + i;
        self.max[v * r..(v + 1) * r].copy_from_slice(free);
        while v > 1 {
            v /= 2;
            self.pull(v);
        }
    }

    fn could_fit(&self, v: usize, req: &[u64]) -> bool {
        let r = self.res;
        self.max[v * r..(v + 1) * r].iter().zip(req).all(|(m, q)| m >= q)
    }

    /// Visits node indices in `range` that fit `req`, in order, below tree vertex `v` covering
    /// `span`; returns false once `f` did.
    fn visit(
        &self,
        v: usize,
        span: (usize, usize),
        range: (usize, usize),
        req: &[u64],
        f: &mut dyn FnMut(usize) -> bool,
    ) -> bool {
        let ((vlo, vhi), (lo, hi)) = (span, range);
        if vhi <= lo || hi <= vlo || vlo >= self.nodes || !self.could_fit(v, req) {
            return true;
        }
        if vhi - vlo == 1 {
            return f(vlo);
        }
        let mid = (vlo + vhi) / 2;
        self.visit(2 * v, (vlo, mid), range, req, f) && self.visit(2 * v + 1, (mid, vhi), range, req, f)
    }

    /// Calls `f` on each node where `req` fits, from `start` wrapping around, until it returns false.
    pub fn for_each_fitting(&self, req: &[u64], start: usize, mut f: impl FnMut(usize) -> bool) {
        if self.nodes == 0 {
            return;
        }
        let start = start % self.nodes;
        if self.visit(1, (0, self.size), (start, self.nodes), req, &mut f) {
            self.visit(1, (0, self.size), (0, start), req, &mut f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_fitting_nodes_in_wrapped_order() {
        let free = vec![vec![1, 5], vec![4, 4], vec![0, 9], vec![4, 1], vec![8, 8]];
        let mut ix = NodeIndex::new(&free, 2);
        let collect = |ix: &NodeIndex, req: &[u64], start| {
            let mut out = vec![];
            ix.for_each_fitting(req, start, |n| {
                out.push(n);
                true
            });
            out
        };
        assert_eq!(collect(&ix, &[2, 2], 0), vec![1, 4]);
        assert_eq!(collect(&ix, &[2, 2], 2), vec![4, 1]);
        assert_eq!(collect(&ix, &[9, 0], 0), Vec::<usize>::new());
        ix.update(4, &[0, 0]);
        ix.update(3, &[4, 4]);
        assert_eq!(collect(&ix, &[2, 2], 4), vec![1, 3]);
    }
}
